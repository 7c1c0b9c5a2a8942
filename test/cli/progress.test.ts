import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { ProgressView, deviceShares, formatDeviceShare, formatEta } from '../../src/cli/progress.ts';
import type { TrainEvent } from '../../src/runtime/events/events.ts';

class Capture extends Writable {
  text = '';
  constructor(
    readonly isTTY: boolean,
    readonly columns = 160,
  ) {
    super();
  }
  override _write(chunk: Buffer, _enc: string, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

/** Two epochs of a 3-device run in which device 2 computes 3× slower. */
function events(): TrainEvent[] {
  const out: TrainEvent[] = [
    {
      type: 'start',
      runDir: 'runs/x',
      dataSource: 'subset',
      backend: 'wasm',
      devices: 3,
      processes: 1,
      strategy: 'hybrid',
      parameters: 1000,
      trainSamples: 960,
      testSamples: 100,
      epochs: 2,
      stepsPerEpoch: 5,
      globalBatch: 96,
    },
  ];
  for (let epoch = 0; epoch < 2; epoch++) {
    for (let s = 0; s < 5; s++) {
      for (let rank = 0; rank < 3; rank++) {
        const computeMs = rank === 2 ? 30 : 10;
        out.push({
          type: 'step',
          rank,
          epoch,
          step: epoch * 5 + s,
          stepInEpoch: s,
          stepsPerEpoch: 5,
          loss: 2 - 0.1 * s,
          accuracy: 0.1 * s,
          lr: 0.001,
          samples: 32,
          computeMs,
          syncMs: 32 - computeMs,
          idleMs: 30 - computeMs,
          bytes: 100,
        });
      }
    }
    for (let rank = 0; rank < 3; rank++) {
      const computeMs = rank === 2 ? 150 : 50;
      out.push({
        type: 'rankEpoch',
        rank,
        epoch,
        lossSum: 300,
        correct: 100,
        samples: 160,
        seconds: 0.2,
        computeMs,
        syncMs: 160 - computeMs,
        idleMs: 150 - computeMs,
        bytes: 500,
      });
    }
    out.push({ type: 'epoch', epoch, loss: 1.8, accuracy: 0.3, samples: 480, seconds: 0.2, samplesPerSecond: 2400 });
    out.push({ type: 'eval', epoch, step: epoch * 5 + 5, testLoss: 1.5, testAccuracy: 0.45 });
  }
  out.push({ type: 'end', seconds: 0.5, samplesPerSecond: 1920, testAccuracy: 0.45, testLoss: 1.5, maxRssBytes: 1 });
  return out;
}

test('not a terminal: plain lines, and per epoch a line per device with the straggler flagged', () => {
  const out = new Capture(false);
  const view = new ProgressView(out as unknown as NodeJS.WriteStream);
  for (const e of events()) view.handle(e);
  const lines = out.text.trimEnd().split('\n');
  assert.ok(!out.text.includes('\x1b'), 'no escape sequences');
  assert.match(
    lines[0]!,
    /^run runs\/x: 1,000 parameters, backend wasm, 3 device\(s\), strategy hybrid, global batch 96$/,
  );
  assert.equal(lines[1], 'epoch 1/2: loss 1.8000, train accuracy 30.00%, 2400 samples/s, 0.2 s');
  assert.match(lines[2]!, /^ {2}device 0 {2}compute +31% {2}comm +6% {2}idle +63% {2}0\.31 ms\/sample$/);
  assert.match(lines[4]!, /^ {2}device 2 {2}compute +94% {2}comm +6% {2}idle +0% {2}0\.94 ms\/sample {2}⚠ straggler$/);
  assert.equal(lines[5], 'epoch 1/2: test loss 1.5000, test accuracy 45.00%');
  assert.equal(lines.at(-1), 'done in 0.5 s, 1920 samples/s, test accuracy 45.00%');
  assert.equal(lines.filter((l) => l.includes('straggler')).length, 2, 'once per epoch');
});

test('--quiet prints nothing', () => {
  const out = new Capture(true);
  const view = new ProgressView(out as unknown as NodeJS.WriteStream, true);
  for (const e of events()) view.handle(e);
  view.stopBar();
  assert.equal(out.text, '');
});

test('on a terminal: a bar with epoch, step, loss, accuracy, samples/s and ETA, and a live line per device', async () => {
  const out = new Capture(true);
  const view = new ProgressView(out as unknown as NodeJS.WriteStream);
  try {
    const all = events();
    const cut = all.findIndex((e) => e.type === 'rankEpoch');
    for (const e of all.slice(0, cut)) view.handle(e);
    await new Promise((r) => setTimeout(r, 300)); // the bars redraw on a timer
    const live = out.text;
    assert.match(live, /epoch 1\/2 step 5\/5 \[[█░]+\] loss \d\.\d{4} \| acc \d+\.\d\d% \| \d+ samples\/s \| ETA \d+s/);
    assert.match(live, /device 0 {2}compute +31% {2}comm +6% {2}idle +63%/);
    assert.match(live, /device 2 {2}compute +94% {2}comm +6% {2}idle +0% {2}0\.94 ms\/sample {2}⚠ straggler/);
    for (const e of all.slice(cut)) view.handle(e);
    assert.match(out.text, /epoch 2\/2: test loss 1\.5000/);
    assert.match(out.text, /done in 0\.5 s/);
  } finally {
    view.stopBar();
  }
});

test('device shares and ETA formatting', () => {
  const shares = deviceShares([
    { rank: 0, computeMs: 80, commMs: 10, idleMs: 10, samples: 100 },
    { rank: 1, computeMs: 200, commMs: 0, idleMs: 0, samples: 100 },
  ]);
  assert.deepEqual(
    shares.map((s) => s.straggler),
    [false, true],
  );
  assert.equal(formatDeviceShare(shares[0]!), 'device 0  compute  80%  comm  10%  idle  10%  0.80 ms/sample');
  assert.deepEqual([formatEta(5.2), formatEta(65), formatEta(3700), formatEta(NaN)], ['5s', '1m05s', '1h01m', '—']);
});
