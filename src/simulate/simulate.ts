/**
 * The simulation: for each link, straggler scenario, strategy and device count, one row of
 * predictions (step time, samples/s, scaling efficiency, bytes per step and device, idle share,
 * and for the asynchronous rules the staleness distribution). Lockstep strategies run as steps of
 * sampled straggler factors (lockstep.ts); the parameter-server ones event by event (serverSim.ts).
 */
import type { RunConfig } from '../config/index.ts';
import type { StrategySpec } from '../parallel/strategies/index.ts';
import type { ModelSpec } from '../nn/spec.ts';
import type { Link } from './units.ts';
import type { ShmModel, Network, Placement } from './costModel.ts';
import { computeTime, type ModelCosts } from './layerCosts.ts';
import { StragglerSampler, type Stragglers } from './stragglers.ts';
import type { StrategyChoice } from './choices.ts';
import { averagingPlan, hybridPlan, runLockstep, trickPlan, type LockstepPlan, type Overlap } from './lockstep.ts';
import { simulateServerOverPhases, simulateSync } from './serverSim.ts';
import { markForTrick, trickWorkload } from './trick.ts';
import type { ModelWeights } from './weights.ts';
import { deviceMemoryBytes } from './memory.ts';
import { shardedPlan } from './shardingCost.ts';
import { compressedExchange, compressedPlan, placesOf } from './compressionCost.ts';
import { pipelinePlan } from './pipelineSim.ts';
import { tensorWorkload } from './tensorSim.ts';

/** Everything one simulation needs, every flag checked. */
export interface SimulationSetup {
  /** the model as the trick runs it (its marks, or every dense layer marked) */
  trickModel: ModelSpec;
  /** per-layer costs of the model with every layer data-parallel */
  costs: ModelCosts;
  devices: number[];
  links: Link[];
  stragglers: Stragglers[];
  strategies: StrategyChoice[];
  /** the per-device batch ('perDevice') or the step's whole batch split over the devices ('global') */
  batch: { size: number; scope: 'perDevice' | 'global' };
  /** devices per host (process): threads over shared memory, hosts over TCP */
  perHost: number;
  shm: ShmModel;
  /** bytes/s one process's ring loop handles (none: the link alone) */
  hostRate?: number;
  /** the parameter server's own process's devices: loopback TCP (default: shm α, the host rate) */
  loopback?: Link;
  chunkBytes?: number;
  overlap: Overlap;
  /** steps simulated per device (Monte Carlo of stragglers, the event simulation) */
  steps: number;
  seed: number;
  /** `--stragglers run`: the factors to resample */
  runFactors?: number[];
  /** the server's optimizer step, seconds (default: the measured optimizer's time per parameter × parameters) */
  serverUpdate?: number;
  /** the weights' tensors, buckets and optimizer slots (sharding, compression, pipelines, memory) */
  weights?: ModelWeights;
  /** per compressed strategy's label and device count, its codec's arithmetic per step, seconds (timed here) */
  codecSeconds?: Record<string, Record<number, number>>;
}

/** Summary of a staleness distribution. */
export interface Staleness {
  mean: number;
  p50: number;
  p95: number;
  max: number;
}

/** One prediction: a strategy on G devices, one link, one straggler scenario. */
export interface SimRow {
  strategy: string;
  kind: StrategyChoice['kind'];
  devices: number;
  link: Link;
  stragglers: Stragglers;
  feasible: boolean;
  /** why not (infeasible rows) */
  reason?: string;
  stepSeconds: number;
  samplesPerSecond: number;
  /** samples/s over G × one device's */
  efficiency: number;
  bytesPerStep: number;
  /** weights, gradients, state, optimizer state and the strategy's buffers on the fullest device (memory.ts) */
  memoryBytes: number;
  idleShare: number;
  staleness?: Staleness;
  /** parameter-server strategies: each device's mean step (they differ: device 0 reaches a remote server over loopback) */
  deviceStepSeconds?: number[];
}

/** The q-quantile of sorted values (the smallest value with at least q of them at or below it). */
export function quantile(sorted: readonly number[], q: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/** Mean, median, 95th percentile and maximum of staleness values. */
export function stalenessOf(values: readonly number[]): Staleness {
  const s = [...values].sort((a, b) => a - b);
  return {
    mean: s.reduce((a, b) => a + b, 0) / Math.max(1, s.length),
    p50: quantile(s, 0.5),
    p95: quantile(s, 0.95),
    max: s[s.length - 1] ?? NaN,
  };
}

/** hosts × devices per host for G devices: `perHost` threads per process (fewer when G is smaller). */
export function placementOf(G: number, perHost: number): Placement {
  if (G <= perHost) return { hosts: 1, perHost: G };
  if (G % perHost !== 0)
    throw new Error(
      `--per-host ${perHost}: ${G} devices do not fill whole hosts; use device counts that are multiples of ${perHost}`,
    );
  return { hosts: G / perHost, perHost };
}

/** Samples in one step of the job and on the slowest device, or the reason the batch cannot be split. */
export function batchOf(setup: SimulationSetup, G: number): { total: number; perDevice: number } | string {
  const { size, scope } = setup.batch;
  if (scope === 'perDevice') return { total: size * G, perDevice: size };
  if (size < G)
    return `a global batch of ${size} cannot be split over ${G} devices (simulate a per-device batch with --batch-size N)`;
  return { total: size, perDevice: Math.ceil(size / G) };
}

function infeasible(
  base: Omit<
    SimRow,
    'feasible' | 'stepSeconds' | 'samplesPerSecond' | 'efficiency' | 'bytesPerStep' | 'idleShare' | 'memoryBytes'
  >,
  reason: string,
): SimRow {
  return {
    ...base,
    feasible: false,
    reason,
    stepSeconds: NaN,
    samplesPerSecond: NaN,
    efficiency: NaN,
    bytesPerStep: NaN,
    memoryBytes: NaN,
    idleShare: NaN,
  };
}

/** One device alone: compute and the local optimizer step; the baseline of scaling efficiency. */
export function singleDeviceRate(setup: SimulationSetup): number {
  const b = batchOf(setup, 1) as { total: number };
  return b.total / (computeTime(setup.costs, b.total) + setup.costs.optimizerPerFloat * setup.costs.paramFloats);
}

function simulateOne(
  setup: SimulationSetup,
  choice: StrategyChoice,
  G: number,
  link: Link,
  stragglers: Stragglers,
  oneDevice: number,
): SimRow {
  const base = { strategy: choice.label, kind: choice.kind, devices: G, link, stragglers };
  const batch = batchOf(setup, G);
  if (typeof batch === 'string') return infeasible(base, batch);
  const net: Network = {
    tcp: {
      link,
      hostRate: setup.hostRate,
      chunkBytes: setup.chunkBytes,
      ...(setup.loopback ? { loopback: setup.loopback } : {}),
    },
    shm: setup.shm,
  };
  const placement = placementOf(G, setup.perHost);
  const sampler = new StragglerSampler(stragglers, setup.seed, setup.runFactors);
  const { costs, weights } = setup,
    spec: StrategySpec = choice.spec;
  // a replica's buffers; the strategies that change them say so below
  let memoryBytes = weights
    ? deviceMemoryBytes({
        paramFloats: costs.paramFloats,
        stateFloats: costs.stateFloats,
        optimizerSlots: weights.optimizerSlots,
      })
    : NaN;
  const finish = (
    stepSeconds: number,
    samplesPerSecond: number,
    idleShare: number,
    bytesPerStep: number,
    staleness?: number[],
  ): SimRow => ({
    ...base,
    feasible: true,
    stepSeconds,
    samplesPerSecond,
    efficiency: samplesPerSecond / (G * oneDevice),
    idleShare,
    bytesPerStep,
    memoryBytes,
    ...(staleness ? { staleness: stalenessOf(staleness) } : {}),
  });
  if (G === 1) {
    // one device runs no strategy: compute and its own optimizer step
    const u = costs.optimizerPerFloat * costs.paramFloats;
    const o = runLockstep(
      { compute: computeTime(costs, batch.perDevice), tail: () => u, bytes: 0 },
      1,
      setup.steps,
      sampler,
    );
    return finish(o.stepSeconds, batch.total / o.stepSeconds, 0, 0);
  }
  if (choice.kind === 'trick') {
    if (spec.type === 'hybrid' && spec.compression)
      return infeasible(base, "the simulator models compression on hybrid alone, not on the trick's replicated layers");
    const w = trickWorkload(setup.trickModel, costs, G, batch.total);
    if (!w.feasible) return infeasible(base, w.reason);
    if (weights)
      memoryBytes = deviceMemoryBytes({
        paramFloats: w.replicatedFloats + w.shardFloats,
        stateFloats: costs.stateFloats,
        optimizerSlots: weights.optimizerSlots,
      });
    const o = runLockstep(trickPlan(w, costs, placement, net), G, setup.steps, sampler);
    return finish(o.stepSeconds, batch.total / o.stepSeconds, o.idleShare, o.bytesPerStep);
  }
  if (choice.tensorParallel) {
    const t = tensorWorkload(setup.trickModel, costs, choice.tensorParallel, G, batch.total, placement, net);
    if (!t.feasible) return infeasible(base, t.reason);
    if (weights)
      memoryBytes = deviceMemoryBytes({
        paramFloats: t.paramFloats,
        stateFloats: costs.stateFloats,
        optimizerSlots: weights.optimizerSlots,
      });
    const o = runLockstep(t.plan, G, setup.steps, sampler);
    return finish(o.stepSeconds, batch.total / o.stepSeconds, o.idleShare, o.bytesPerStep);
  }
  if (choice.pipeline) {
    const { stages } = choice.pipeline;
    if (G % stages !== 0)
      return infeasible(
        base,
        `train.pipeline has ${stages} stages, so the devices must be a multiple of ${stages} (stages × pipelines), got ${G}`,
      );
    if (!weights) return infeasible(base, 'a pipeline needs the model built (setup.weights)');
    const pipelines = G / stages;
    const b = setup.batch;
    const perPipeline = b.scope === 'perDevice' ? b.size : Math.ceil(b.size / pipelines);
    if (b.scope === 'global' && b.size < pipelines)
      return infeasible(base, `a global batch of ${b.size} cannot be split over ${pipelines} pipelines`);
    const samples = b.scope === 'perDevice' ? b.size * pipelines : b.size;
    let r: ReturnType<typeof pipelinePlan>;
    try {
      r = pipelinePlan(costs, weights, choice.pipeline, perPipeline, G, setup.perHost, net);
    } catch (e) {
      return infeasible(base, (e as Error).message);
    }
    if (typeof r === 'string') return infeasible(base, r);
    memoryBytes = r.memoryBytes;
    const o = runLockstep(r.plan, G, setup.steps, sampler);
    // a stage idles in the schedule's bubble too (its share of a step without stragglers)
    const idle = Math.min(1, o.idleShare + r.bubbleSeconds / o.stepSeconds);
    return finish(o.stepSeconds, samples / o.stepSeconds, idle, o.bytesPerStep);
  }
  if (spec.type === 'hybrid' && (spec.shard || spec.compression)) {
    if (!weights) return infeasible(base, 'sharding and compression need the model built (setup.weights)');
    let plan: LockstepPlan;
    if (spec.shard) {
      const s = shardedPlan(
        costs,
        weights,
        batch.perDevice,
        spec.bucketBytes,
        spec.shard,
        placement,
        net,
        setup.overlap,
        spec.rowBlockBytes,
      );
      plan = s.plan;
      memoryBytes = s.memoryBytes;
    } else {
      const x = compressedExchange(
        spec.compression!,
        costs.paramFloats,
        placesOf(costs.paramFloats, weights),
        placement,
        net,
      );
      if (typeof x === 'string') return infeasible(base, x);
      plan = compressedPlan(costs, batch.perDevice, x.cost, setup.codecSeconds?.[choice.label]?.[G] ?? 0);
      memoryBytes += 4 * x.bufferFloats;
    }
    const o = runLockstep(plan, G, setup.steps, sampler);
    return finish(o.stepSeconds, batch.total / o.stepSeconds, o.idleShare, o.bytesPerStep);
  }
  if (spec.type === 'hybrid') {
    const o = runLockstep(
      hybridPlan(costs, batch.perDevice, spec.bucketBytes, placement, net, setup.overlap),
      G,
      setup.steps,
      sampler,
    );
    return finish(o.stepSeconds, batch.total / o.stepSeconds, o.idleShare, o.bytesPerStep);
  }
  if (
    spec.type === 'bsp' ||
    spec.type === 'bmuf' ||
    spec.type === 'diloco' ||
    (spec.type === 'easgd' && spec.mode === 'sync')
  ) {
    const o = runLockstep(
      averagingPlan(costs, batch.perDevice, { kind: spec.type, period: spec.period }, placement, net),
      G,
      setup.steps,
      sampler,
    );
    return finish(o.stepSeconds, batch.total / o.stepSeconds, o.idleShare, o.bytesPerStep);
  }
  const job = {
    devices: G,
    hosts: placement.hosts,
    perHost: placement.perHost,
    steps: setup.steps,
    compute: computeTime(costs, batch.perDevice),
    paramBytes: costs.paramFloats * 4,
    update: setup.serverUpdate ?? costs.optimizerPerFloat * costs.paramFloats,
    elastic: costs.optimizerPerFloat * costs.paramFloats,
    net,
    stragglers: sampler,
  };
  // every device steps on its own slice; the job's samples per step are the same as a lockstep step's
  const rate = (o: { seconds: number }) => (batch.total * setup.steps) / o.seconds;
  if (spec.type === 'sync') {
    const o = simulateSync(job);
    return {
      ...finish(o.stepSeconds, rate(o), o.idleShare, o.bytesPerStep, o.staleness),
      deviceStepSeconds: o.deviceStepSeconds,
    };
  }
  const rule =
    spec.type === 'async'
      ? {
          kind: 'async' as const,
          fetchEvery: spec.fetchEvery,
          pushEvery: spec.pushEvery,
          maxStaleness: spec.maxStaleness,
        }
      : { kind: 'easgd' as const, period: spec.period };
  const o = simulateServerOverPhases(job, rule, setup.seed);
  return {
    ...finish(o.stepSeconds, rate(o), o.idleShare, o.bytesPerStep, rule.kind === 'async' ? o.staleness : undefined),
    deviceStepSeconds: o.deviceStepSeconds,
  };
}

/** Every row of the setup: links × stragglers × strategies × device counts, in that order. */
export function simulate(setup: SimulationSetup): SimRow[] {
  const oneDevice = singleDeviceRate(setup);
  const rows: SimRow[] = [];
  for (const link of setup.links) {
    for (const stragglers of setup.stragglers) {
      for (const choice of setup.strategies) {
        for (const G of setup.devices) rows.push(simulateOne(setup, choice, G, link, stragglers, oneDevice));
      }
    }
  }
  return rows;
}

/** The trick's model for a config: its own marks, else every dense layer marked. */
export function trickModelOf(config: RunConfig): ModelSpec {
  return markForTrick(config.model);
}
