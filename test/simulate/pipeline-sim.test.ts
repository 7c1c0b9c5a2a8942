/**
 * The simulator's pipeline timeline: the schedules of parallel/pipeline/schedule.ts walked with
 * each op's time. With equal stage times and free transfers the idle share is the bubble
 * (p − 1)/(m + p − 1) exactly, and the makespan is the runtime's own schedule checker's
 * (simulateSchedule) for any forward/backward times; transfers and a whole step traced by hand.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pipelinePlan, stageGroupPlacement, walkPipeline } from '../../src/simulate/pipelineSim.ts';
import { idealBubble, pipelineSchedule, simulateSchedule } from '../../src/parallel/pipeline/schedule.ts';
import { allreduce, type Network } from '../../src/simulate/costModel.ts';
import type { LayerCost, ModelCosts } from '../../src/simulate/layerCosts.ts';
import type { ModelWeights } from '../../src/simulate/weights.ts';
import type { OptimizerSpec } from '../../src/optim/spec.ts';
import { parseLink } from '../../src/simulate/units.ts';

const close = (a: number, b: number) => assert.ok(Math.abs(a - b) <= 1e-12 * Math.max(1, Math.abs(b)), `${a} ≠ ${b}`);
const free = (f: number, b: number) => ({
  forward: () => f,
  backward: () => b,
  sendActivation: () => 0,
  sendGradient: () => 0,
});

test('equal stage times, free transfers: idle share (p − 1)/(m + p − 1) exactly, both schedules', () => {
  for (const schedule of ['gpipe', '1f1b'] as const)
    for (const p of [2, 3, 4, 8])
      for (const m of [1, 2, 4, 8, 16]) {
        const t = walkPipeline(pipelineSchedule(schedule, p, m), free(1, 1));
        const idle = t.busy.reduce((s, b) => s + (t.makespan - b), 0) / (p * t.makespan);
        close(idle, (p - 1) / (m + p - 1));
        close(idle, idealBubble(p, m));
        close(t.makespan, 2 * (m + p - 1));
      }
});

test('the makespan agrees with schedule.ts simulateSchedule for unequal forward and backward', () => {
  for (const schedule of ['gpipe', '1f1b'] as const)
    for (const [p, m] of [
      [2, 3],
      [4, 8],
      [5, 2],
    ] as const) {
      const ops = pipelineSchedule(schedule, p, m);
      close(walkPipeline(ops, free(1, 2.5)).makespan, simulateSchedule(ops, 1, 2.5).makespan);
    }
});

test('transfers: 2 stages, 1 micro-batch: forward, send, forward, backward, send back, backward', () => {
  const t = walkPipeline(pipelineSchedule('gpipe', 2, 1), {
    forward: (s) => [1, 2][s]!,
    backward: (s) => [3, 4][s]!,
    sendActivation: () => 0.5,
    sendGradient: () => 0.25,
  });
  close(t.makespan, 1 + 0.5 + 2 + 4 + 0.25 + 3);
  assert.deepEqual(t.busy, [4, 6]);
});

function layer(index: number, paramOffset: number, paramFloats: number): LayerCost {
  return {
    index,
    type: 'dense',
    name: `layers.${index}`,
    forward: { fixed: 0, perSample: 1e-3 },
    backward: { fixed: 0, perSample: 2e-3 },
    paramOffset,
    paramFloats,
    inputShape: [1],
    outputShape: [10],
    outputElements: 10,
    flopsPerSample: 1,
  };
}

test('a step: the schedule, then each stage all-reduced over its pipelines and its optimizer', () => {
  const costs: ModelCosts = {
    layers: [layer(0, 0, 1000), layer(1, 1000, 1000)],
    paramFloats: 2000,
    stateFloats: 0,
    optimizerPerFloat: 1e-9,
    source: 'by hand',
  };
  const weights: ModelWeights = {
    tensors: [],
    readyOffsets: [1000, 0],
    layerParams: [1000, 1000],
    optimizerSlots: 2,
    optimizer: { type: 'adam' } as OptimizerSpec,
  };
  const net: Network = { tcp: { link: parseLink('1gbit:50us') }, shm: { alpha: 5e-6, beta: 16e9 } };
  // 8 devices, one per host: 4 pipelines of 2 stages, a pipeline's stages one process (2 per host)
  const group = stageGroupPlacement(8, 2, 1);
  assert.deepEqual(group, { hosts: 4, perHost: 1 });
  const m = 4,
    batch = 32;
  const r = pipelinePlan(costs, weights, { stages: 2, microBatches: m, schedule: '1f1b' }, batch, 8, 1, net);
  assert.ok(typeof r !== 'string');
  const micro = batch / m;
  const transfer = 5e-6 + (2 * 10 * micro * 4) / 16e9;
  // equal stages: 2 forwards ahead of stage 1's first, then m rounds of f + b: (m + 1)(f + b) + transfers
  const f = 1e-3 * micro,
    b = 2e-3 * micro;
  const shared: Network = { ...net, tcp: { ...net.tcp, link: { ...net.tcp.link, beta: net.tcp.link.beta / 2 } } };
  const reduce = allreduce(1000 * 4, { hosts: 4, perHost: 1 }, shared);
  const step = r.plan.compute + r.plan.tail(1);
  const schedule = walkPipeline(pipelineSchedule('1f1b', 2, m), {
    forward: () => f,
    backward: () => b,
    sendActivation: () => transfer,
    sendGradient: () => transfer,
  });
  close(step, schedule.makespan + reduce.seconds + 1e-9 * 1000);
  assert.ok(schedule.makespan >= (m + 1) * (f + b) && schedule.makespan <= (m + 1) * (f + b) + 2 * m * transfer);
  // bytes per device: m activations and m gradients each way over the boundary, halved over the 2 stages, + the all-reduce
  close(r.plan.bytes, (4 * m * 10 * micro * 4) / 2 + reduce.bytes);
  // memory: the fuller stage's weights, gradients and Adam's two slots
  assert.equal(r.memoryBytes, 16 * 1000);
  assert.match(
    String(pipelinePlan(costs, weights, { stages: 2, microBatches: 64, schedule: 'gpipe' }, 32, 2, 1, net)),
    /exceeds/,
  );
  assert.match(String(stageGroupPlacement(6, 2, 4)), /do not fill whole hosts/);
});
