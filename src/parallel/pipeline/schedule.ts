/**
 * Pipeline schedules: the ordered operations each stage of a pipeline runs in one step, as pure
 * functions of (schedule, p stages, m micro-batches, stage s).
 *
 * - `gpipe` (Huang et al., 2019): every micro-batch's forward, then every backward. A stage holds
 *   the activations of all m micro-batches at once.
 * - `1f1b` (PipeDream-Flush, Narayanan et al., 2019/2021; Megatron-LM's non-interleaved schedule):
 *   stage s runs w = min(p − s − 1, m) warm-up forwards, then alternates one forward and one
 *   backward, then drains the remaining backwards. It holds at most min(p − s, m) micro-batches'
 *   activations, and with equal op times has GPipe's bubble, (p − 1)/(m + p − 1).
 *
 * Backwards run in micro-batch order 0 … m − 1 in both, so every stage accumulates its gradients in
 * the order the unsplit micro-batched step does (parallel/microbatch.ts): the sums are bit-identical.
 *
 * Sends and receives are explicit ops. The schedules are deadlock-free even where a send waits for
 * its receiver (rendezvous: a message larger than a shared-memory mailbox): in 1F1B's steady state
 * a stage exchanges with one neighbour twice in a row (its activation out, a gradient back), and
 * the two sides order such a pair by parity — an even stage sends first, an odd one receives first
 * (Megatron pairs them as one batched isend/irecv instead). `simulateSchedule` checks it.
 */

export const PIPELINE_SCHEDULES = ['gpipe', '1f1b'] as const;
export type PipelineScheduleName = (typeof PIPELINE_SCHEDULES)[number];

/** Activations travel from stage s to s + 1, their gradients from s + 1 back to s. */
export type PipelineOpKind =
  | 'recvActivation'
  | 'forward'
  | 'sendActivation'
  | 'recvGradient'
  | 'backward'
  | 'sendGradient';

export interface PipelineOp {
  kind: PipelineOpKind;
  /** the micro-batch, 0 … m − 1 */
  micro: number;
}

/** The neighbour an op exchanges with (−1 or p: none — such ops are never generated). */
export function opPeer(op: PipelineOp, stage: number): number {
  switch (op.kind) {
    case 'recvActivation':
    case 'sendGradient':
      return stage - 1;
    case 'sendActivation':
    case 'recvGradient':
      return stage + 1;
    default:
      return -1;
  }
}

function checkShape(stages: number, microBatches: number, stage: number): void {
  if (!Number.isInteger(stages) || stages < 1)
    throw new Error(`pipeline: stages must be a positive integer, got ${stages}`);
  if (!Number.isInteger(microBatches) || microBatches < 1)
    throw new Error(`pipeline: microBatches must be a positive integer, got ${microBatches}`);
  if (!Number.isInteger(stage) || stage < 0 || stage >= stages)
    throw new Error(`pipeline: stage ${stage} is not one of 0 … ${stages - 1}`);
}

/** Stage `stage`'s ops in one step of `schedule` with `stages` stages and `microBatches` micro-batches. */
export function stageOps(
  schedule: PipelineScheduleName,
  stages: number,
  microBatches: number,
  stage: number,
): PipelineOp[] {
  checkShape(stages, microBatches, stage);
  const first = stage === 0,
    last = stage === stages - 1;
  const ops: PipelineOp[] = [];
  const add = (kind: PipelineOpKind, micro: number) => ops.push({ kind, micro });
  const forward = (k: number, recv = true, send = true) => {
    if (!first && recv) add('recvActivation', k);
    add('forward', k);
    if (!last && send) add('sendActivation', k);
  };
  const backward = (k: number, recv = true, send = true) => {
    if (!last && recv) add('recvGradient', k);
    add('backward', k);
    if (!first && send) add('sendGradient', k);
  };
  const m = microBatches;
  const warmup = schedule === 'gpipe' ? m : Math.min(stages - stage - 1, m);
  const steady = m - warmup;
  for (let k = 0; k < warmup; k++) forward(k);
  // the steady state's pairs with one neighbour, ordered by parity (even: send first)
  const sendFirst = stage % 2 === 0;
  const pair = (send: () => void, recv: () => void) => {
    for (const f of sendFirst ? [send, recv] : [recv, send]) f();
  };
  for (let i = 0; i < steady; i++) {
    const k = warmup + i;
    if (i === 0 && !first) add('recvActivation', k);
    add('forward', k);
    if (!last)
      pair(
        () => add('sendActivation', k),
        () => add('recvGradient', i),
      );
    add('backward', i);
    if (!first) {
      if (i < steady - 1)
        pair(
          () => add('sendGradient', i),
          () => add('recvActivation', k + 1),
        );
      else add('sendGradient', i);
    }
  }
  for (let k = steady; k < m; k++) backward(k);
  return ops;
}

/** Every stage's ops. */
export function pipelineSchedule(schedule: PipelineScheduleName, stages: number, microBatches: number): PipelineOp[][] {
  return Array.from({ length: stages }, (_, s) => stageOps(schedule, stages, microBatches, s));
}

export interface SimulatedPipeline {
  /** when the last op of the last stage to finish ends */
  makespan: number;
  /** per stage, the time it computed (forward + backward) */
  busy: number[];
  /** idle fraction of the whole pipeline: 1 − Σ busy / (p × makespan) */
  bubble: number;
  /** per stage, the most micro-batches whose activations it held at once (forward done, backward not) */
  peakInFlight: number[];
  /** per stage, its compute ops with their start and end times, in order */
  timeline: { kind: 'forward' | 'backward'; micro: number; start: number; end: number }[][];
}

/**
 * Runs the schedule on a model of the transports: compute ops take `forwardTime`/`backwardTime`,
 * messages take no time, and a send completes only when its receiver reaches the matching receive
 * (rendezvous, the strictest a transport may be). Throws on an op out of order (a backward
 * before its forward, a receive of something never sent) and on a deadlock, naming the stages.
 */
export function simulateSchedule(ops: PipelineOp[][], forwardTime = 1, backwardTime = 1): SimulatedPipeline {
  const p = ops.length;
  const at = new Array<number>(p).fill(0),
    clock = new Array<number>(p).fill(0),
    busy = new Array<number>(p).fill(0);
  const held = new Array<number>(p).fill(0),
    peakInFlight = new Array<number>(p).fill(0);
  const forwarded = ops.map(() => new Set<number>()),
    received = ops.map(() => new Set<string>());
  const timeline: SimulatedPipeline['timeline'] = ops.map(() => []);
  const match: Record<string, PipelineOpKind> = {
    sendActivation: 'recvActivation',
    sendGradient: 'recvGradient',
  };
  let remaining = ops.reduce((n, o) => n + o.length, 0);
  while (remaining > 0) {
    let progressed = false;
    for (let s = 0; s < p; s++) {
      const op = ops[s]![at[s]!];
      if (!op) continue;
      if (op.kind === 'forward' || op.kind === 'backward') {
        const needs = op.kind === 'forward' ? (s > 0 ? 'recvActivation' : null) : s < p - 1 ? 'recvGradient' : null;
        if (needs && !received[s]!.has(`${needs}:${op.micro}`))
          throw new Error(`stage ${s}: ${op.kind} ${op.micro} before its ${needs}`);
        if (op.kind === 'backward' && !forwarded[s]!.has(op.micro))
          throw new Error(`stage ${s}: backward ${op.micro} before its forward`);
        const t = op.kind === 'forward' ? forwardTime : backwardTime;
        timeline[s]!.push({ kind: op.kind, micro: op.micro, start: clock[s]!, end: clock[s]! + t });
        clock[s]! += t;
        busy[s]! += t;
        if (op.kind === 'forward') {
          forwarded[s]!.add(op.micro);
          peakInFlight[s] = Math.max(peakInFlight[s]!, ++held[s]!);
        } else held[s]!--;
      } else if (op.kind === 'sendActivation' || op.kind === 'sendGradient') {
        const peer = opPeer(op, s),
          theirs = ops[peer]?.[at[peer]!];
        if (op.kind === 'sendActivation' && !forwarded[s]!.has(op.micro))
          throw new Error(`stage ${s}: sends activation ${op.micro} before computing it`);
        if (!theirs || theirs.kind !== match[op.kind] || theirs.micro !== op.micro) continue;
        const t = Math.max(clock[s]!, clock[peer]!);
        clock[s] = clock[peer] = t;
        received[peer]!.add(`${theirs.kind}:${op.micro}`);
        at[peer]!++;
        remaining--;
      } else continue; // a receive completes with its send
      at[s]!++;
      remaining--;
      progressed = true;
    }
    if (!progressed) {
      const stuck = ops.map((o, s) => (o[at[s]!] ? `stage ${s} at ${o[at[s]!]!.kind} ${o[at[s]!]!.micro}` : null));
      throw new Error(`pipeline schedule deadlocks: ${stuck.filter(Boolean).join(', ')}`);
    }
  }
  const makespan = Math.max(...clock);
  const total = busy.reduce((a, b) => a + b, 0);
  return { makespan, busy, bubble: 1 - total / (p * makespan), peakInFlight, timeline };
}

/** GPipe's bubble with equal op times: (p − 1)/(m + p − 1). */
export function idealBubble(stages: number, microBatches: number): number {
  return (stages - 1) / (microBatches + stages - 1);
}
