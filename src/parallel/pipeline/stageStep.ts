import { Tensor } from '../../tensor/tensor.ts';
import type { Communicator } from '../../comm/communicator.ts';
import type { ForwardContext } from '../../nn/layer.ts';
import type { Loss } from '../../nn/loss.ts';
import { microBatchRanges, type MicroBatchResult } from '../microbatch.ts';
import type { PipelineOp } from './schedule.ts';
import type { PipelineStage } from './stage.ts';

/** One step's batch, as every stage of a pipeline sees it (all of them see the same samples). */
export interface PipelineBatch {
  /** samples in the batch (every stage slices it into the same micro-batches) */
  samples: number;
  microBatches: number;
  /** stage 0: the inputs [samples, ...model input] */
  x?: Tensor;
  /** the last stage: the labels (and targets: regression, multi-label), `samples` rows */
  labels?: Int32Array;
  targets?: Float32Array;
  ctx: ForwardContext;
  /** each micro-batch's loss gradient is scaled by it, as the whole batch's would be (microbatch.ts) */
  gradScale: number;
}

/** Where the stage's neighbours are in `comm`, and the tags its messages use from `tagBase` on. */
export interface PipelineLinks {
  comm: Communicator;
  /** ranks of the stages before and after (null: none) */
  prev: number | null;
  next: number | null;
  tagBase: number;
}

/** When one op of a stage ran (ms, performance.now()). */
export interface OpTiming {
  kind: PipelineOp['kind'];
  micro: number;
  start: number;
  end: number;
}

export interface StageStepResult extends MicroBatchResult {
  /** the most activation bytes the stage held at once (every copy in flight, after each forward) */
  peakActivationBytes: number;
}

/** Activation k travels with tag tagBase + 2k, its gradient with tagBase + 2k + 1. */
const activationTag = (links: PipelineLinks, k: number) => links.tagBase + 2 * k;
const gradientTag = (links: PipelineLinks, k: number) => links.tagBase + 2 * k + 1;

/** How many copies of its layers `ops` needs at once: a micro-batch holds one from its first op to its backward. */
export function copiesNeeded(ops: readonly PipelineOp[]): number {
  const open = new Set<number>();
  let most = 0;
  for (const op of ops) {
    if (op.kind === 'backward') open.delete(op.micro);
    else if (op.kind === 'recvActivation' || op.kind === 'forward') open.add(op.micro);
    most = Math.max(most, open.size);
  }
  return most;
}

/**
 * Runs one stage's ops of one step: receive an activation → forward → send it on; receive its
 * gradient → backward (accumulating the stage's weight gradients) → send the input's gradient
 * back. The last stage computes each micro-batch's loss at its backward, its gradient scaled by
 * the batch's `gradScale`, so the sum over micro-batches is the whole batch's gradient; it alone
 * returns loss sums (the other stages return zeros). Micro-batches are those of
 * parallel/microbatch.ts (the same slices, dropout offsets and order of accumulation), so every
 * stage's gradients are the unsplit micro-batched step's, bit for bit.
 */
export async function runStageStep(
  stage: PipelineStage,
  ops: readonly PipelineOp[],
  batch: PipelineBatch,
  links: PipelineLinks,
  loss: Loss | null,
  timings?: OpTiming[],
): Promise<StageStepResult> {
  const { comm } = links;
  const first = links.prev === null,
    last = links.next === null;
  if (first && !batch.x) throw new Error('pipeline stage 0: the step has no inputs');
  if (last && (!loss || !batch.labels)) throw new Error('pipeline: the last stage needs the loss and the labels');
  if (batch.ctx.lengths)
    throw new Error('parallel.pipeline: sequence batches with per-sample lengths are not supported');
  const ranges = microBatchRanges(batch.samples, batch.microBatches);
  const per = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
  const inSize = per(stage.inputShape),
    outSize = per(stage.outputShape);
  const perLabel = batch.labels ? batch.labels.length / Math.max(batch.samples, 1) : 0,
    perTarget = batch.targets ? batch.targets.length / Math.max(batch.samples, 1) : 0;
  const free = stage.copies.map((_, c) => stage.copies.length - 1 - c),
    copyOf = new Map<number, number>();
  const take = (k: number): number => {
    let c = copyOf.get(k);
    if (c === undefined) {
      c = free.pop();
      if (c === undefined)
        throw new Error(`pipeline stage ${stage.stage}: more micro-batches in flight than its copies`);
      copyOf.set(k, c);
    }
    return c;
  };
  const { pool } = stage;
  const inputs = new Map<number, Tensor>(),
    outputs = new Map<number, Tensor>(),
    grads = new Map<number, Tensor>(),
    inputGrads = new Map<number, Tensor>();
  const result: StageStepResult = { lossSum: 0, correct: 0, samples: batch.samples, peakActivationBytes: 0 };
  const forwarded = new Set<number>();
  // a send the schedule puts after a receive, made before it where the transport takes it at once
  const sentAhead = new Set<number>();
  const sendAhead = (i: number): void => {
    const op = ops[i];
    if (!op || !comm.trySend) return;
    const t0 = timings ? performance.now() : 0;
    if (op.kind === 'sendActivation' && outputs.has(op.micro)) {
      if (!comm.trySend(outputs.get(op.micro)!.data, links.next!, activationTag(links, op.micro))) return;
      outputs.delete(op.micro);
    } else if (op.kind === 'sendGradient' && inputGrads.has(op.micro)) {
      if (!comm.trySend(inputGrads.get(op.micro)!.data, links.prev!, gradientTag(links, op.micro))) return;
      inputGrads.delete(op.micro);
    } else return;
    sentAhead.add(i);
    timings?.push({ kind: op.kind, micro: op.micro, start: t0, end: performance.now() });
  };
  for (const [i, op] of ops.entries()) {
    if (sentAhead.has(i)) continue;
    const k = op.micro,
      { start, end } = ranges[k]!,
      n = end - start;
    // 1F1B's odd stages receive before they send (schedule.ts: the order rendezvous sends need);
    // a send that completes at once goes first, so the neighbour's next op is not held up by this receive
    if (op.kind === 'recvActivation' || op.kind === 'recvGradient') sendAhead(i + 1);
    const t0 = timings ? performance.now() : 0;
    switch (op.kind) {
      case 'recvActivation': {
        const c = take(k),
          x = new Tensor([n, ...stage.inputShape], pool.f32(`in${c}`, n * inSize));
        await comm.recv(x.data, links.prev!, activationTag(links, k));
        inputs.set(k, x);
        break;
      }
      case 'forward': {
        const c = take(k);
        const x = first
          ? new Tensor([n, ...batch.x!.shape.slice(1)], batch.x!.data.subarray(start * inSize, end * inSize))
          : inputs.get(k)!;
        const ctx: ForwardContext = {
          ...batch.ctx,
          sampleOffset: batch.ctx.sampleOffset + start,
          localOffset: (batch.ctx.localOffset ?? 0) + start,
        };
        outputs.set(k, await stage.copies[c]!.forwardAsync(x, ctx));
        inputs.delete(k);
        forwarded.add(k);
        let held = 0;
        for (const m of forwarded) held += stage.copies[copyOf.get(m)!]!.lastActivationBytes;
        result.peakActivationBytes = Math.max(result.peakActivationBytes, held);
        break;
      }
      case 'sendActivation':
        await comm.send(outputs.get(k)!.data, links.next!, activationTag(links, k));
        outputs.delete(k);
        break;
      case 'recvGradient': {
        const c = take(k),
          g = new Tensor([n, ...stage.outputShape], pool.f32(`grad${c}`, n * outSize));
        await comm.recv(g.data, links.next!, gradientTag(links, k));
        grads.set(k, g);
        break;
      }
      case 'backward': {
        const c = take(k);
        let dy = grads.get(k);
        if (last) {
          const logits = outputs.get(k)!;
          outputs.delete(k);
          const r = loss!.compute(
            logits,
            batch.labels!.subarray(start * perLabel, end * perLabel),
            batch.gradScale,
            batch.targets &&
              (ranges.length === 1 ? batch.targets : batch.targets.subarray(start * perTarget, end * perTarget)),
          );
          result.lossSum += r.lossSum;
          result.correct += r.correct;
          if (r.absErrorSum !== undefined) result.absErrorSum = (result.absErrorSum ?? 0) + r.absErrorSum;
          if (r.exactMatches !== undefined) result.exactMatches = (result.exactMatches ?? 0) + r.exactMatches;
          dy = r.dlogits;
        }
        await stage.copies[c]!.backwardAsync(dy!);
        grads.delete(k);
        if (!first) inputGrads.set(k, stage.inputs[c]!.inputGrad!);
        forwarded.delete(k);
        copyOf.delete(k);
        free.push(c);
        break;
      }
      case 'sendGradient':
        // the copy may already serve the next micro-batch's receive, never its forward or backward: the gradient is intact
        await comm.send(inputGrads.get(k)!.data, links.prev!, gradientTag(links, k));
        inputGrads.delete(k);
        break;
    }
    timings?.push({ kind: op.kind, micro: k, start: t0, end: performance.now() });
  }
  return result;
}
