/**
 * A pull sends the weights as they were when it was served, even when another device's push is
 * applied while the send still drains (the transport does not copy a payload; on a slow link a
 * 2.7 MB pull takes 200 ms). A fake communicator delivers a send's bytes when its promise
 * resolves, and holds device 0's pull until device 1's push has been applied.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Communicator } from '../../src/comm/communicator.ts';
import { serveParameterServer } from '../../src/parallel/parameterServer/host.ts';
import { PsHeader } from '../../src/parallel/parameterServer/protocol.ts';
import { createOptimizer } from '../../src/optim/optimizer.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';

const REQUEST = 1,
  REPLY = 2,
  DATA = 3,
  PULL = 1,
  PUSH = 2,
  BYE = 6;

/** Rank 0's side of a world of 3: messages to it are queued by (source, tag); its sends are held until `release`. */
class SlowWire implements Partial<Communicator> {
  readonly rank = 0;
  readonly size = 3;
  private inbox = new Map<string, { data: Float32Array[]; waiters: ((d: Float32Array) => void)[] }>();
  readonly delivered: { dest: number; tag: number; data: Float32Array }[] = [];
  private held: (() => void)[] = [];
  /** sends to this rank wait until released */
  holdFor = -1;
  onSend?: (dest: number, tag: number) => void;

  private box(source: number, tag: number) {
    const k = `${source}/${tag}`;
    if (!this.inbox.has(k)) this.inbox.set(k, { data: [], waiters: [] });
    return this.inbox.get(k)!;
  }
  put(source: number, tag: number, data: Float32Array): void {
    const b = this.box(source, tag);
    const w = b.waiters.shift();
    if (w) w(data);
    else b.data.push(data);
  }
  async recv(buf: Float32Array, source: number, tag = 0): Promise<void> {
    const b = this.box(source, tag);
    const data = b.data.shift() ?? (await new Promise<Float32Array>((resolve) => b.waiters.push(resolve)));
    buf.set(data);
  }
  send(buf: Float32Array, dest: number, tag = 0): Promise<void> {
    // the bytes leave when the send completes: what the buffer holds then is what arrives
    const deliver = () => this.delivered.push({ dest, tag, data: buf.slice() });
    this.onSend?.(dest, tag);
    if (dest === this.holdFor && tag === DATA)
      return new Promise((resolve) =>
        this.held.push(() => {
          deliver();
          resolve();
        }),
      );
    deliver();
    return Promise.resolve();
  }
  release(): void {
    for (const r of this.held.splice(0)) r();
  }
}

test('a pull is a copy: a push applied while it drains does not tear it', { timeout: 10_000 }, async () => {
  const n = 64;
  const params = Float32Array.from({ length: n }, (_, i) => i / n);
  const before = params.slice();
  const wire = new SlowWire();
  wire.holdFor = 1;
  // device 1's reply is sent once its push has been applied: then device 0's pull may finish draining
  wire.onSend = (dest, tag) => {
    if (dest === 2 && tag === REPLY) queueMicrotask(() => wire.release());
  };
  const opt = createOptimizer(jsBackend, { type: 'sgd', lr: 1, momentum: 0, nesterov: false, weightDecay: 0 }, n);
  const serving = serveParameterServer(wire as unknown as Communicator, params, opt);
  const h = new PsHeader();
  wire.put(1, REQUEST, h.set(PULL).wire.slice());
  await new Promise((r) => setTimeout(r, 10));
  wire.put(2, REQUEST, h.set(PUSH, 0, 1, -1).wire.slice());
  wire.put(2, DATA, new Float32Array(n).fill(1));
  await new Promise((r) => setTimeout(r, 10));
  wire.put(1, REQUEST, h.set(BYE).wire.slice());
  wire.put(2, REQUEST, h.set(BYE).wire.slice());
  await serving;
  const pulled = wire.delivered.find((d) => d.dest === 1 && d.tag === DATA)!;
  assert.deepEqual(pulled.data, before, 'device 0 got the weights of the version it was told (0), not a later one');
  assert.notDeepEqual(params, before, 'the push was applied meanwhile');
});
