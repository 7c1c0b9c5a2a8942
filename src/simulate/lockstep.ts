/**
 * The strategies whose devices run every step together (hybrid, the trick, bsp, bmuf, diloco,
 * synchronous easgd), as paratrain implements them. A step's collectives wait for the slowest device, so with
 * straggler factors f_i in a step the step takes T(max f_i): compute scaled by it, then what follows.
 *
 *   hybrid: gradients all-reduced in buckets of bucketBytes (from the last layer backwards; the
 *     bucket at offset 0 waits for applyUpdate), then the optimizer. Overlapped: each bucket starts
 *     when backward has passed it and the link is free (hybrid.ts over TCP: backward yields to
 *     the event loop between layers while a bucket is in flight). Serial: compute, then Σ buckets
 *     (shared memory reduces each bucket inline, blocking backward). 'implemented' overlaps where
 *     paratrain does: on one host it is serial; across hosts with one device each the whole
 *     allreduce overlaps; with several devices per host (comm/hierarchical.ts) each bucket's
 *     reduce-scatter inside the host runs in line when backward has passed it, its slice crosses
 *     the link meanwhile, and the allgathers inside the host follow backward in order, the last
 *     bucket's three parts after them. 'ideal' overlaps whole allreduces always.
 *   trick: the section's activation exchanges in forward and backward, then the replicated
 *     layers' gradients all-reduced, then the optimizer on the replicated part and this device's shards.
 *   bsp, bmuf, diloco, easgd (sync): every step the devices agree on a one-float flag (a NaN/Inf
 *     step is skipped everywhere: runtime/device/badSteps.ts), which is a per-step synchronisation;
 *     every `period` steps the weights (and state) are averaged (bsp: with a two-float weight round
 *     first; diloco communicates as bmuf does, its outer optimizer is local arithmetic).
 */
import { allreduce, type CollectiveCost, type Network, type Placement } from './costModel.ts';
import { computeTime, type ModelCosts } from './layerCosts.ts';
import type { StragglerSampler } from './stragglers.ts';
import { allgather, hierarchicalParts, reduceScatter } from './costModel.ts';
import type { Exchange, TrickWorkload } from './trick.ts';

/** One lockstep strategy's step: compute, what follows it, and the periodic rounds. */
export interface LockstepPlan {
  /** nominal forward + backward seconds of the slowest device's rows (scaled by the straggler factor) */
  compute: number;
  /** what follows compute in a step, given the step's largest straggler factor */
  tail(fmax: number): number;
  /** bytes per device moved in every step */
  bytes: number;
  /** work done every `every` steps (averaging rounds) */
  periodic?: { every: number; seconds: number; bytes: number };
}

/** Gradient buckets as paratrain runs them (overlapping backward across hosts) or overlapping it on every transport. */
export type Overlap = 'implemented' | 'ideal';

/**
 * Whether hybrid's buckets overlap backward: across hosts as implemented (with several devices per
 * host, the part that crosses the link), always when ideal.
 */
export function bucketsOverlap(overlap: Overlap, p: Placement): boolean {
  return overlap === 'ideal' || p.hosts > 1;
}

/** Gradient buckets as hybrid.ts forms them: [floats, ready time within backward] in launch order. */
export function gradientBuckets(
  costs: ModelCosts,
  batch: number,
  bucketBytes: number,
): { floats: number; ready: number }[] {
  const bucketFloats = Math.max(1, Math.floor(bucketBytes / 4));
  let reducedFrom = costs.paramFloats;
  let t = 0;
  for (const l of costs.layers) t += l.forward.fixed + l.forward.perSample * batch;
  const out: { floats: number; ready: number }[] = [];
  for (let i = costs.layers.length - 1; i >= 0; i--) {
    const l = costs.layers[i]!;
    t += l.backward.fixed + l.backward.perSample * batch;
    const offset = l.paramOffset;
    if (offset <= 0 || reducedFrom - offset < bucketFloats) continue;
    out.push({ floats: reducedFrom - offset, ready: t });
    reducedFrom = offset;
  }
  if (reducedFrom > 0) out.push({ floats: reducedFrom, ready: t });
  return out;
}

/** hybrid: buckets of gradients all-reduced, then the optimizer step. */
export function hybridPlan(
  costs: ModelCosts,
  batch: number,
  bucketBytes: number,
  p: Placement,
  net: Network,
  overlap: Overlap,
  /** ZeRO (shardingCost.ts): each bucket's collective (default: an allreduce) and the optimizer's seconds */
  variant: { bucket?: (bytes: number) => CollectiveCost; update?: number } = {},
): LockstepPlan {
  const compute = computeTime(costs, batch);
  const bucketCost = variant.bucket ?? ((n: number) => allreduce(n, p, net));
  const buckets = gradientBuckets(costs, batch, bucketBytes).map((b) => ({
    ...b,
    cost: bucketCost(b.floats * 4),
  }));
  const update = variant.update ?? costs.optimizerPerFloat * costs.paramFloats;
  const comm = buckets.reduce((s, b) => s + b.cost.seconds, 0);
  const overlapped = bucketsOverlap(overlap, p);
  if (overlap === 'implemented' && p.hosts > 1 && p.perHost > 1 && !variant.bucket) {
    const parts = buckets.map((b) => ({ ready: b.ready, ...hierarchicalParts(b.floats * 4, p, net) }));
    return {
      compute,
      bytes: buckets.reduce((s, b) => s + b.cost.bytes, 0),
      tail: (f) => hierarchicalTail(parts, compute * f, f) + update,
    };
  }
  return {
    compute,
    bytes: buckets.reduce((s, b) => s + b.cost.bytes, 0),
    tail: (f) => {
      if (!overlapped) return comm + update;
      let end = 0;
      for (const b of buckets) end = Math.max(b.ready * f, end) + b.cost.seconds;
      return Math.max(end - compute * f, 0) + update;
    },
  };
}

/**
 * What follows backward (ending at `computeEnd` unshared) of hierarchical buckets as
 * comm/hierarchical.ts runs them while backward computes: each reduce-scatter in line when
 * backward has passed its bucket (delaying what follows), its slice's ring on the link once that
 * is free, the allgathers in order after backward; the last bucket (offset 0, from applyUpdate)
 * starts behind them.
 */
function hierarchicalTail(
  buckets: { ready: number; scatter: CollectiveCost; cross: CollectiveCost; gather: CollectiveCost }[],
  computeEnd: number,
  f: number,
): number {
  let delay = 0,
    linkFree = 0;
  const crossed: number[] = [];
  for (const b of buckets.slice(0, -1)) {
    const scattered = b.ready * f + delay + b.scatter.seconds;
    delay += b.scatter.seconds;
    linkFree = Math.max(scattered, linkFree) + b.cross.seconds;
    crossed.push(linkFree);
  }
  let t = computeEnd + delay;
  for (const [i, b] of buckets.slice(0, -1).entries()) t = Math.max(t, crossed[i]!) + b.gather.seconds;
  const last = buckets[buckets.length - 1];
  if (last) t = Math.max(t + last.scatter.seconds, linkFree) + last.cross.seconds + last.gather.seconds;
  return t - computeEnd;
}

/**
 * The trick: the section's exchanges, the replicated gradients' allreduce, the optimizer.
 * tensorSim.ts runs the section on a group's own communicator (`exchange`) and averages the
 * shards over the groups (`after`, before the optimizer).
 */
export function trickPlan(
  w: Extract<TrickWorkload, { feasible: true }>,
  costs: ModelCosts,
  p: Placement,
  net: Network,
  variant: { exchange?: (e: Exchange) => CollectiveCost; after?: CollectiveCost } = {},
): LockstepPlan {
  const world = (e: Exchange) => {
    const n = e.floats * 4;
    return e.op === 'allgather'
      ? allgather(n, p, net, true)
      : e.op === 'reduceScatter'
        ? reduceScatter(n, p, net, true)
        : allreduce(n, p, net, true);
  };
  const costsOf = [...w.exchanges.map(variant.exchange ?? world), ...(variant.after ? [variant.after] : [])];
  const grads = allreduce(w.replicatedFloats * 4, p, net);
  const fixed =
    costsOf.reduce((s, c) => s + c.seconds, 0) +
    grads.seconds +
    costs.optimizerPerFloat * (w.replicatedFloats + w.shardFloats);
  return { compute: w.compute, bytes: costsOf.reduce((s, c) => s + c.bytes, 0) + grads.bytes, tail: () => fixed };
}

/** The model-averaging rules and their period. */
export type AveragingRule = { kind: 'bsp' | 'bmuf' | 'diloco' | 'easgd'; period: number };

/** bsp, bmuf, diloco, easgd (sync): local steps agreed every step, weights averaged every period. */
export function averagingPlan(
  costs: ModelCosts,
  batch: number,
  rule: AveragingRule,
  p: Placement,
  net: Network,
): LockstepPlan {
  const agree = allreduce(4, p, net);
  const params = allreduce(costs.paramFloats * 4, p, net),
    state = allreduce(costs.stateFloats * 4, p, net);
  // the elementwise work of a round (scaling, the centre, the block filter or the outer optimizer): about an SGD step's
  const arithmetic = costs.optimizerPerFloat * costs.paramFloats;
  const weights = rule.kind === 'bsp' ? allreduce(8, p, net) : { seconds: 0, bytes: 0 };
  const update = costs.optimizerPerFloat * costs.paramFloats;
  return {
    compute: computeTime(costs, batch),
    bytes: agree.bytes,
    tail: () => agree.seconds + update,
    periodic: {
      every: rule.period,
      seconds: weights.seconds + params.seconds + state.seconds + arithmetic,
      bytes: weights.bytes + params.bytes + state.bytes,
    },
  };
}

/** Mean step time, idle share and bytes per step of a lockstep simulation. */
export interface LockstepOutcome {
  stepSeconds: number;
  idleShare: number;
  bytesPerStep: number;
}

/**
 * Runs `steps` steps of G devices: each step's factors drawn per device, the step taking
 * compute·max f + tail(max f) (+ the periodic round); a device idles (max f − f_i)·compute.
 */
export function runLockstep(
  plan: LockstepPlan,
  G: number,
  steps: number,
  stragglers: StragglerSampler,
): LockstepOutcome {
  const every = plan.periodic?.every ?? 1;
  const K = Math.max(every, Math.ceil(steps / every) * every);
  let total = 0,
    idle = 0;
  for (let k = 0; k < K; k++) {
    let fmax = 0,
      fsum = 0;
    for (let d = 0; d < G; d++) {
      const f = stragglers.factor(d, k);
      fsum += f;
      if (f > fmax) fmax = f;
    }
    let t = plan.compute * fmax + plan.tail(fmax);
    if (plan.periodic && (k + 1) % every === 0) t += plan.periodic.seconds;
    total += t;
    idle += (fmax - fsum / G) * plan.compute;
  }
  return {
    stepSeconds: total / K,
    idleShare: total > 0 ? idle / total : 0,
    bytesPerStep: plan.bytes + (plan.periodic ? plan.periodic.bytes / every : 0),
  };
}
