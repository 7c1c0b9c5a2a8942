/**
 * The strategies whose devices run every step together (hybrid, the trick, bsp, bmuf, diloco,
 * synchronous easgd), as paratrain implements them. A step's collectives wait for the slowest device, so with
 * straggler factors f_i in a step the step takes T(max f_i): compute scaled by it, then what follows.
 *
 *   hybrid: gradients all-reduced in buckets of bucketBytes (from the last layer backwards; the
 *     bucket at offset 0 waits for applyUpdate), then the optimizer. 'implemented' overlap: the
 *     backward of plain layers never yields to the event loop, so the TCP ring moves every bucket
 *     after backward (and shared memory reduces them inline): compute, then Σ buckets. 'ideal':
 *     each bucket starts when backward has passed it and the link is free.
 *   trick: the section's activation exchanges in forward and backward, then the replicated
 *     layers' gradients all-reduced, then the optimizer on the replicated part and this device's shards.
 *   bsp, bmuf, diloco, easgd (sync): every step the devices agree on a one-float flag (a NaN/Inf
 *     step is skipped everywhere: runtime/device/badSteps.ts), which is a per-step synchronisation;
 *     every `period` steps the weights (and state) are averaged (bsp: with a two-float weight round
 *     first; diloco communicates as bmuf does, its outer optimizer is local arithmetic).
 */
import { allreduce, type Network, type Placement } from './costModel.ts';
import { computeTime, type ModelCosts } from './layerCosts.ts';
import type { StragglerSampler } from './stragglers.ts';
import { allgather, reduceScatter } from './costModel.ts';
import type { TrickWorkload } from './trick.ts';

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

/** Gradient buckets after backward (what paratrain does) or overlapping it. */
export type Overlap = 'implemented' | 'ideal';

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
): LockstepPlan {
  const compute = computeTime(costs, batch);
  const buckets = gradientBuckets(costs, batch, bucketBytes).map((b) => ({
    ...b,
    cost: allreduce(b.floats * 4, p, net),
  }));
  const update = costs.optimizerPerFloat * costs.paramFloats;
  const comm = buckets.reduce((s, b) => s + b.cost.seconds, 0);
  return {
    compute,
    bytes: buckets.reduce((s, b) => s + b.cost.bytes, 0),
    tail: (f) => {
      if (overlap === 'implemented') return comm + update;
      let end = 0;
      for (const b of buckets) end = Math.max(b.ready * f, end) + b.cost.seconds;
      return Math.max(end - compute * f, 0) + update;
    },
  };
}

/** The trick: the section's exchanges, the replicated gradients' allreduce, the optimizer. */
export function trickPlan(
  w: Extract<TrickWorkload, { feasible: true }>,
  costs: ModelCosts,
  p: Placement,
  net: Network,
): LockstepPlan {
  const costsOf = w.exchanges.map((e) => {
    const n = e.floats * 4;
    return e.op === 'allgather'
      ? allgather(n, p, net, true)
      : e.op === 'reduceScatter'
        ? reduceScatter(n, p, net, true)
        : allreduce(n, p, net, true);
  });
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
