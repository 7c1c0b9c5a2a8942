/**
 * `train.tensorParallel: g` in the simulator (`tensor:size=g`): Megatron-LM's tensor × data layout
 * as parallel/modelParallel/tensorGroups.ts runs it. G devices are G/g groups of g consecutive
 * devices; each group runs the trick's model-parallel section (trick.ts, the same plan and
 * exchanges) over its own rows, its collectives on the group's communicator; each shard's gradient
 * is then averaged over the devices that hold it, one per group; the replicated part over every
 * device by hybrid; the optimizer steps the replicated part and the device's shards.
 *
 * A group of the whole job uses the world's own collectives: it is the trick. A smaller group and
 * the shards' holders are comm/subgroup.ts rings over the world's point-to-point calls: each ring
 * step sends this member's slice to the next member and receives the previous member's. Within a
 * host that is a copy into a shared-memory mailbox and one out, in mailbox-sized chunks (α each way
 * per chunk), the host's threads sharing its memory bandwidth; between hosts a message of TCP
 * frames (α + the frames on the link, which the host's threads' rings share). Devices of different
 * processes reach each other only at the same thread index (comm/hierarchical.ts), so a layout
 * that needs another pair is n/a, as paratrain refuses it.
 */
import { ownedSlice } from '../comm/communicator.ts';
import { rowSplit } from '../parallel/modelParallel/activationExchange.ts';
import { shardLayout } from '../parallel/modelParallel/shards.ts';
import {
  DEFAULT_CHUNK_BYTES,
  FRAME_HEADER_BYTES,
  streamRate,
  type CollectiveCost,
  type Network,
  type Placement,
} from './costModel.ts';
import type { ModelCosts } from './layerCosts.ts';
import { trickPlan, type LockstepPlan } from './lockstep.ts';
import { directLink } from '../comm/hierarchical.ts';
import type { ModelSpec } from '../nn/spec.ts';
import { trickWorkload, type CollectiveKind } from './trick.ts';

/** A shared-memory mailbox's payload (comm/shm/world.ts: mailboxBytes, 256 KiB): a longer message goes in chunks. */
export const MAILBOX_FLOATS = (256 << 10) / 4;

/** One ring step of a `floats`-float slice from device a to device b: a mailbox within a host, TCP frames between hosts. */
function stepSeconds(floats: number, a: number, b: number, p: Placement, net: Network): number {
  if (Math.floor(a / p.perHost) === Math.floor(b / p.perHost)) {
    const chunks = Math.ceil(floats / MAILBOX_FLOATS);
    return 2 * chunks * net.shm.alpha + (2 * floats * 4 * p.perHost) / net.shm.beta;
  }
  const frames = Math.max(1, Math.ceil((floats * 4) / (net.tcp.chunkBytes ?? DEFAULT_CHUNK_BYTES)));
  return net.tcp.link.alpha + (floats * 4 + frames * FRAME_HEADER_BYTES) / streamRate(net.tcp, p.perHost);
}

/**
 * One collective of a comm/subgroup.ts ring over `members` (world ranks, in ring order). Steps:
 * reduce-scatter and all-gather m − 1, an all-reduce both; each as slow as the ring's slowest link.
 * Bytes: what the world's send and recv count (each step's slice out and slice in), the mean over
 * the members: 2(m − 1)/m of the buffer a half.
 */
export function subgroupRing(
  op: CollectiveKind,
  floats: number,
  members: readonly number[],
  p: Placement,
  net: Network,
): CollectiveCost {
  const m = members.length;
  if (m <= 1 || floats <= 0) return { seconds: 0, bytes: 0 };
  const halves = op === 'allreduce' ? 2 : 1;
  const { start, end } = ownedSlice(floats, m, 0);
  const step = Math.max(...members.map((a, i) => stepSeconds(end - start, a, members[(i + 1) % m]!, p, net)));
  return { seconds: halves * (m - 1) * step, bytes: (halves * 2 * (m - 1) * floats * 4) / m };
}

/** Samples the fullest group computes: its members' rows of the step's `total` split over G devices. */
export function groupRows(total: number, G: number, g: number): number {
  return rowSplit(total, G)
    .counts.slice(0, g)
    .reduce((a, b) => a + b, 0);
}

/** One tensor-parallel step and the fullest device's weights, or why paratrain refuses the layout. */
export type TensorWorkload =
  | { feasible: true; plan: LockstepPlan; paramFloats: number }
  | { feasible: false; reason: string };

const range = <T>(n: number, f: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => f(i));

/** The first pair of devices the layout needs that has no link (tensorGroups.ts: every pair of a group, the holders' ring). */
function missingLink(g: number, G: number, p: Placement): [number, number, string] | null {
  if (p.hosts <= 1) return null;
  for (let a = 0; a < g; a++)
    for (let b = a + 1; b < g; b++) if (!directLink(a, b, p.perHost)) return [a, b, 'a tensor-parallel group'];
  const holders = range(G / g, (q) => q * g);
  for (const [i, a] of holders.entries()) {
    const b = holders[(i + 1) % holders.length]!;
    if (holders.length > 1 && !directLink(a, b, p.perHost)) return [a, b, 'the devices holding a shard'];
  }
  return null;
}

/**
 * tensorParallel = g on G devices placed as `p`, `total` samples in the step: the trick's workload
 * on the fullest group, its exchanges on the group's ring (the world's collectives when g = G), the
 * shards' all-reduce over the G/g groups, and the replicated part's all-reduce and the optimizer
 * as the trick has them.
 */
export function tensorWorkload(
  spec: ModelSpec,
  costs: ModelCosts,
  g: number,
  G: number,
  total: number,
  p: Placement,
  net: Network,
): TensorWorkload {
  if (G % g !== 0)
    return {
      feasible: false,
      reason: `train.tensorParallel: a tensor-parallel group of ${g} devices must divide the job's ${G}`,
    };
  const missing = g < G ? missingLink(g, G, p) : null;
  if (missing)
    return {
      feasible: false,
      reason: `train.tensorParallel: groups of ${g} on hosts of ${p.perHost} devices need devices ${missing[0]} and ${missing[1]} (${missing[2]}) to exchange messages, but devices of different processes reach each other only at the same thread index; use --per-host ${g} or --per-host 1`,
    };
  const w = trickWorkload(spec, costs, g, groupRows(total, G, g));
  if (!w.feasible) return w;
  const paramFloats = w.replicatedFloats + w.shardFloats;
  if (g === G) return { feasible: true, plan: trickPlan(w, costs, p, net), paramFloats };
  // the devices at place r of every group hold the same shard: g rings of G/g, at once
  const data = range(g, (r) =>
    subgroupRing(
      'allreduce',
      shardLayout(w.plan, r).length,
      range(G / g, (q) => q * g + r),
      p,
      net,
    ),
  );
  const shardData: CollectiveCost = {
    seconds: Math.max(...data.map((c) => c.seconds)),
    bytes: data.reduce((s, c) => s + c.bytes, 0) / g,
  };
  const group = range(g, (i) => i);
  const plan = trickPlan(w, costs, p, net, {
    exchange: (e) => subgroupRing(e.op, e.floats, group, p, net),
    after: shardData,
  });
  return { feasible: true, plan, paramFloats };
}
