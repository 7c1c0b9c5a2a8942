import type { Layer } from '../../nn/layer.ts';
import { shapeSize } from '../../tensor/shape.ts';

/**
 * Layers → pipeline stages: consecutive layers of the model on consecutive stages, each stage at
 * least one layer (a residual block or a transformer block is one layer of the model, so it is
 * never cut). Balanced by a per-layer cost: the partition minimises the largest stage's cost, the
 * stage that sets a pipeline's pace (the linear-partition problem, solved exactly by dynamic
 * programming in O(p n²)). `boundaries` overrides it: the index of each stage's first layer after
 * stage 0, as in `boundaries: [3, 7]` (stages [0, 3), [3, 7), [7, n)).
 */

/** Stage s runs layers [start, end) of the model. */
export interface StageRange {
  start: number;
  end: number;
}

/** Per layer, its trainable values: the default cost (the weights a stage stores, updates and — for dense layers — multiplies by). */
export function parameterCosts(layers: readonly Layer[]): number[] {
  return layers.map((l) => l.params().reduce((n, p) => n + shapeSize(p.shape), 0));
}

/** Checks user boundaries against the model: `stages − 1` layer indices, increasing, inside (0, layers). */
export function checkBoundaries(boundaries: readonly number[], layers: number, stages: number): StageRange[] {
  const field = 'parallel.pipeline.boundaries';
  if (boundaries.length !== stages - 1)
    throw new Error(
      `${field}: ${stages} stages need ${stages - 1} boundaries (each stage's first layer after stage 0), got ${boundaries.length}`,
    );
  let prev = 0;
  for (const b of boundaries) {
    if (!Number.isInteger(b) || b <= prev || b >= layers)
      throw new Error(
        `${field}: [${boundaries.join(', ')}] must be increasing layer indices between 1 and ${layers - 1} (the model has ${layers} layers), so every stage gets at least one layer`,
      );
    prev = b;
  }
  const cuts = [0, ...boundaries, layers];
  return cuts.slice(0, -1).map((start, s) => ({ start, end: cuts[s + 1]! }));
}

/**
 * Splits layers with `costs` into `stages` consecutive ranges minimising the largest range's cost
 * (ties: the later cut, so layers without cost — activations — stay with the layer before them).
 */
export function partitionLayers(
  costs: readonly number[],
  stages: number,
  boundaries?: readonly number[],
): StageRange[] {
  const n = costs.length;
  if (!Number.isInteger(stages) || stages < 1)
    throw new Error(`parallel.pipeline.stages: expected a positive integer, got ${stages}`);
  if (stages > n)
    throw new Error(
      `parallel.pipeline.stages: ${stages} stages for a model of ${n} layer${n === 1 ? '' : 's'}; every stage needs at least one layer, so use at most ${n} stages`,
    );
  if (boundaries) return checkBoundaries(boundaries, n, stages);
  for (const [i, c] of costs.entries())
    if (!(c >= 0) || !Number.isFinite(c)) throw new Error(`pipeline partition: layer ${i}'s cost is ${c}`);
  const prefix = [0];
  for (const c of costs) prefix.push(prefix[prefix.length - 1]! + c);
  const range = (i: number, j: number) => prefix[j]! - prefix[i]!;
  // best[k][j]: the least largest cost of layers [0, j) on k + 1 stages; cut[k][j]: where the last stage starts
  const best: number[][] = [Array.from({ length: n + 1 }, (_, j) => (j === 0 ? Infinity : range(0, j)))];
  const cut: number[][] = [new Array<number>(n + 1).fill(0)];
  for (let k = 1; k < stages; k++) {
    best.push(new Array<number>(n + 1).fill(Infinity));
    cut.push(new Array<number>(n + 1).fill(-1));
    for (let j = k + 1; j <= n; j++) {
      for (let i = k; i < j; i++) {
        const v = Math.max(best[k - 1]![i]!, range(i, j));
        if (v <= best[k]![j]!) {
          best[k]![j] = v;
          cut[k]![j] = i;
        }
      }
    }
  }
  const ranges: StageRange[] = [];
  let end = n;
  for (let k = stages - 1; k >= 0; k--) {
    const start = cut[k]![end]!;
    ranges.unshift({ start, end });
    end = start;
  }
  return ranges;
}
