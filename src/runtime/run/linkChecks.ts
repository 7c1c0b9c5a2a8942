/**
 * Pipelines and tensor-parallel groups send point to point between chosen pairs of devices, and in
 * a job of several processes only some pairs have a link (comm/hierarchical.ts: the same process,
 * or the same thread index in another). A layout that needs another pair would fail at its first
 * message deep in the run; this lists every pair it needs and refuses it before the run starts.
 */
import { directLink } from '../../comm/hierarchical.ts';
import { stageRanks } from '../../parallel/pipeline/net.ts';
import { tensorGroupRanks } from '../../parallel/modelParallel/tensorGroups.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import type { JobShape } from '../job/jobShape.ts';

/** Two devices that must exchange messages, and what for. */
interface Pair {
  a: number;
  b: number;
  why: string;
}

/** A subgroup's ring (comm/subgroup.ts): each member sends to the next. */
function ringPairs(ranks: readonly number[], why: string): Pair[] {
  if (ranks.length < 2) return [];
  return ranks.map((a, i) => ({ a, b: ranks[(i + 1) % ranks.length]!, why }));
}

/** Every pair of a subgroup: broadcasts from any member. */
function allPairs(ranks: readonly number[], why: string): Pair[] {
  return ranks.flatMap((a, i) => ranks.slice(i + 1).map((b) => ({ a, b, why })));
}

/** What a job of `devices` devices in pipelines of `stages` sends point to point (parallel/pipeline/net.ts). */
export function pipelinePairs(devices: number, stages: number): Pair[] {
  const pairs: Pair[] = [];
  for (let first = 0; first < devices; first += stages)
    for (let s = 0; s + 1 < stages; s++)
      pairs.push({ a: first + s, b: first + s + 1, why: `stages ${s} and ${s + 1} of one pipeline (activations)` });
  // checkpoints and evaluation gather pipeline 0's stages on device 0
  for (let s = 1; s < stages; s++) pairs.push({ a: s, b: 0, why: `the gather of the model on device 0` });
  for (let s = 0; s < stages; s++) {
    const group = stageRanks(s, devices, stages);
    const why = `stage ${s}'s data-parallel group`;
    // hybrid's ring, and its first broadcast of the weights from the group's first member
    pairs.push(...ringPairs(group, why), ...group.slice(2).map((b) => ({ a: group[0]!, b, why })));
  }
  return pairs;
}

/** What train.tensorParallel = `size` on `devices` devices sends point to point (modelParallel/tensorGroups.ts). */
export function tensorGroupPairs(devices: number, size: number): Pair[] {
  const pairs: Pair[] = [];
  for (let first = 0; first < devices; first += size)
    pairs.push(...allPairs(tensorGroupRanks(first, devices, size).members, 'a tensor-parallel group'));
  for (let place = 0; place < size; place++)
    pairs.push(...ringPairs(tensorGroupRanks(place, devices, size).holders, `the devices holding shard ${place}`));
  return pairs;
}

/** The first pair of `pairs` without a link in a job of `shape`, or null. */
function unlinked(pairs: readonly Pair[], shape: JobShape): Pair | null {
  return pairs.find(({ a, b }) => !directLink(a, b, shape.threads)) ?? null;
}

/**
 * Refuses a pipeline or tensor-parallel layout that needs a pair of devices without a link,
 * naming the pair and the layouts that work: as many devices per process as one pipeline's stages
 * (or one group's devices), or one device per process.
 */
export function checkLinks(config: RunConfig, shape: JobShape): void {
  if (shape.processes < 2) return;
  const { pipeline, tensorParallel } = config.train;
  const { processes, threads, devices } = shape;
  const name = (d: number) => `device ${d} (process ${Math.floor(d / threads)}, thread ${d % threads})`;
  const refuse = (field: string, layout: string, pair: Pair, fits: number, rest: string) => {
    throw new Error(
      `${field}: ${layout} on ${processes} processes × ${threads} devices needs ${name(pair.a)} and ${name(pair.b)} ` +
        `to exchange messages (${pair.why}), but devices of different processes reach each other only at the same thread index; ` +
        `use --devices ${fits} (train.devices: ${fits}, ${rest} per process) or --devices 1 (one device per process), or run one process`,
    );
  };
  if (pipeline) {
    const pair = unlinked(pipelinePairs(devices, pipeline.stages), shape);
    if (pair) refuse('train.pipeline', `${pipeline.stages} stages`, pair, pipeline.stages, 'one pipeline');
  }
  if (tensorParallel !== undefined && tensorParallel < devices) {
    const pair = unlinked(tensorGroupPairs(devices, tensorParallel), shape);
    if (pair) refuse('train.tensorParallel', `groups of ${tensorParallel} devices`, pair, tensorParallel, 'one group');
  }
}
