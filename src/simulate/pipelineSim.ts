/**
 * Pipeline parallelism (`pipeline:stages=2:microBatches=8:schedule=1f1b`) as parallel/pipeline/ runs
 * it: G devices are G/p pipelines of p stages; the layers are cut by partition.ts (the largest
 * stage's trainable values smallest, or the config's boundaries); each pipeline streams its batch
 * through the stages in m micro-batches in the order schedule.ts gives every stage, activations
 * going forward and their gradients back point to point; after the schedule each stage's gradient
 * is all-reduced over the same stage of the other pipelines, then each stage steps its optimizer.
 *
 * The timeline walks every stage's ops: a forward or backward takes that stage's layers' time at
 * the micro-batch's size; a send takes the transfer (a pipeline's stages are threads of one
 * process: shared memory, α + the copy into the mailbox and out of it) and the message is there
 * when it ends; a receive waits for it. Sends never wait for their receiver (the mailbox holds
 * them), so a schedule's order alone decides the waits. With equal stage times and free
 * transfers the idle share is (p − 1)/(m + p − 1), the bubble.
 */
import { allreduce, type CollectiveCost, type Network, type Placement } from './costModel.ts';
import { timeAt, type ModelCosts } from './layerCosts.ts';
import type { LockstepPlan } from './lockstep.ts';
import { deviceMemoryBytes } from './memory.ts';
import type { ModelWeights } from './weights.ts';
import { partitionLayers, type StageRange } from '../parallel/pipeline/partition.ts';
import { pipelineSchedule, type PipelineOp, type PipelineScheduleName } from '../parallel/pipeline/schedule.ts';
import { microBatchRanges } from '../parallel/microbatch.ts';

/** A pipeline as `--strategies pipeline:…` gives it. */
export interface PipelineShape {
  stages: number;
  microBatches: number;
  schedule: PipelineScheduleName;
  boundaries?: number[];
}

/** Seconds of each op of stage s on micro-batch k; transfers are the send's time, the message there when it ends. */
export interface OpTimes {
  forward(s: number, k: number): number;
  backward(s: number, k: number): number;
  sendActivation(s: number, k: number): number;
  sendGradient(s: number, k: number): number;
}

/** When every stage ended its schedule and how long it computed. */
export interface PipelineTimeline {
  makespan: number;
  /** per stage, when its last op ended */
  end: number[];
  /** per stage, seconds of forward and backward */
  busy: number[];
}

/** Walks the stages' ops (eager sends, waiting receives) to the time each stage ends. */
export function walkPipeline(ops: readonly PipelineOp[][], t: OpTimes): PipelineTimeline {
  const p = ops.length;
  const at = new Array<number>(p).fill(0),
    clock = new Array<number>(p).fill(0),
    busy = new Array<number>(p).fill(0);
  /** per receiving stage, `kind:micro` → when the message is there */
  const arrived = ops.map(() => new Map<string, number>());
  let remaining = ops.reduce((n, o) => n + o.length, 0);
  while (remaining > 0) {
    let progressed = false;
    for (let s = 0; s < p; s++) {
      for (let op = ops[s]![at[s]!]; op; op = ops[s]![at[s]!]) {
        const k = op.micro;
        if (op.kind === 'forward' || op.kind === 'backward') {
          const d = op.kind === 'forward' ? t.forward(s, k) : t.backward(s, k);
          clock[s]! += d;
          busy[s]! += d;
        } else if (op.kind === 'sendActivation' || op.kind === 'sendGradient') {
          clock[s]! += op.kind === 'sendActivation' ? t.sendActivation(s, k) : t.sendGradient(s, k);
          const to = op.kind === 'sendActivation' ? s + 1 : s - 1;
          const kind = op.kind === 'sendActivation' ? 'recvActivation' : 'recvGradient';
          arrived[to]!.set(`${kind}:${k}`, clock[s]!);
        } else {
          const when = arrived[s]!.get(`${op.kind}:${k}`);
          if (when === undefined) break;
          clock[s] = Math.max(clock[s]!, when);
        }
        at[s]!++;
        remaining--;
        progressed = true;
      }
    }
    if (!progressed) throw new Error('pipeline timeline: no stage can go on (a receive whose send never comes)');
  }
  return { makespan: Math.max(...clock), end: clock, busy };
}

/** Stage ranges as the runtime cuts them (partition.ts on the layers' trainable values). */
export function stageRanges(weights: ModelWeights, shape: PipelineShape): StageRange[] {
  return partitionLayers(weights.layerParams, shape.stages, shape.boundaries);
}

/** The devices reducing one stage's gradient: one per pipeline; a pipeline's p stages sit in one process. */
export function stageGroupPlacement(G: number, stages: number, perHost: number): Placement | string {
  const perProcess = Math.ceil(perHost / stages) * stages;
  if (G <= perProcess) return { hosts: 1, perHost: G / stages };
  if (G % perProcess !== 0)
    return `a pipeline's ${stages} stages are threads of one process, so a host holds ${perProcess} devices; ${G} devices do not fill whole hosts`;
  return { hosts: G / perProcess, perHost: perProcess / stages };
}

/** One step of G/p pipelines on G devices; `batch` is one pipeline's samples. */
export function pipelinePlan(
  costs: ModelCosts,
  weights: ModelWeights,
  shape: PipelineShape,
  batch: number,
  G: number,
  perHost: number,
  net: Network,
): { plan: LockstepPlan; memoryBytes: number; bubbleSeconds: number } | string {
  const { stages: p, microBatches: m } = shape;
  if (m > batch) return `train.microBatches ${m} exceeds a pipeline's batch of ${batch} samples`;
  const group = stageGroupPlacement(G, p, perHost);
  if (typeof group === 'string') return group;
  const ranges = stageRanges(weights, shape);
  const micro = microBatchRanges(batch, m).map((r) => r.end - r.start);
  const sum = (r: StageRange, f: (i: number) => number) => {
    let x = 0;
    for (let i = r.start; i < r.end; i++) x += f(i);
    return x;
  };
  const layer = (i: number) => costs.layers[i]!;
  const transfer = (s: number, k: number) => {
    const bytes = layer(ranges[s]!.end - 1).outputElements * micro[k]! * 4;
    return net.shm.alpha + (2 * bytes) / net.shm.beta;
  };
  const timeline = walkPipeline(pipelineSchedule(shape.schedule, p, m), {
    forward: (s, k) => sum(ranges[s]!, (i) => timeAt(layer(i).forward, micro[k]!)),
    backward: (s, k) => sum(ranges[s]!, (i) => timeAt(layer(i).backward, micro[k]!)),
    sendActivation: transfer,
    sendGradient: (s, k) => transfer(s - 1, k),
  });
  // the p stages' rings run at once over each host's link
  const shared: Network = { ...net, tcp: { ...net.tcp, link: { ...net.tcp.link, beta: net.tcp.link.beta / p } } };
  const params = ranges.map((r) => sum(r, (i) => layer(i).paramFloats));
  const reduce: CollectiveCost[] = params.map((n) => allreduce(n * 4, group, shared));
  const finish = Math.max(...timeline.end.map((e, s) => e + reduce[s]!.seconds + costs.optimizerPerFloat * params[s]!));
  // every boundary's activations and gradients, sent by one stage and received by the other
  let exchanged = 0;
  for (let s = 0; s + 1 < p; s++)
    exchanged += 2 * 2 * micro.reduce((b, n) => b + layer(ranges[s]!.end - 1).outputElements * n * 4, 0);
  const bytes = (exchanged + reduce.reduce((b, c) => b + c.bytes, 0)) / p;
  return {
    plan: { compute: timeline.makespan, bytes, tail: () => finish - timeline.makespan },
    bubbleSeconds: timeline.busy.reduce((b, x) => b + (timeline.makespan - x), 0) / p,
    memoryBytes: Math.max(
      ...params.map((n) =>
        deviceMemoryBytes({ paramFloats: n, stateFloats: costs.stateFloats, optimizerSlots: weights.optimizerSlots }),
      ),
    ),
  };
}
