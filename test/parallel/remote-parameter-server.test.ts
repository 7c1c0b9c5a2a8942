/**
 * The parameter server in another process's protocol, over real TCP communicators on loopback (all
 * ranks in this process): pushes are applied with the server's optimizer as they arrive, staleness
 * and the bound behave as on the shared-memory server, elastic exchanges and turns work.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { TcpCommunicator } from '../../src/comm/tcp/index.ts';
import { tcpWorld } from '../comm/tcpInProcess.ts';
import { RemoteParameterServer } from '../../src/parallel/parameterServer/remoteClient.ts';
import { serveParameterServer } from '../../src/parallel/parameterServer/host.ts';
import { createOptimizer } from '../../src/optim/optimizer.ts';
import { jsBackend } from '../../src/kernels/js/index.ts';

const secret = 'remote-ps-test-secret';

async function world(
  devices: number,
  timeoutMs = 20_000,
): Promise<{ server: TcpCommunicator; clients: TcpCommunicator[] }> {
  const [server, ...clients] = await tcpWorld(devices + 1, secret, timeoutMs);
  return { server: server!, clients };
}

test('remote parameter server: pull, push with the server optimizer, staleness, bound, elastic, turns', {
  timeout: 60_000,
}, async () => {
  const n = 37;
  const { server, clients } = await world(2);
  const params = Float32Array.from({ length: n }, (_, i) => Math.cos(i));
  const spec = { type: 'sgd', lr: 0.1, momentum: 0.9, nesterov: false, weightDecay: 0 } as const;
  const serverOpt = createOptimizer(jsBackend, spec, n);
  const reference = params.slice(),
    refOpt = createOptimizer(jsBackend, spec, n);
  const serving = serveParameterServer(server, params, serverOpt);
  const [a, b] = clients.map((c) => new RemoteParameterServer(c)) as [RemoteParameterServer, RemoteParameterServer];

  const w = new Float32Array(n);
  assert.equal(await a.pull(w), 0);
  assert.deepEqual(w, reference);
  const g1 = Float32Array.from({ length: n }, (_, i) => Math.sin(i)),
    g2 = Float32Array.from({ length: n }, (_, i) => 0.5 - i / n);
  assert.deepEqual(await a.push(g1, 0, 0.1), { staleness: 0, applied: true });
  assert.deepEqual(await b.push(g2, 0, 0.05), { staleness: 1, applied: true });
  refOpt.stepCount = 0;
  refOpt.step(reference, g1, 0.1);
  refOpt.stepCount = 1;
  refOpt.step(reference, g2, 0.05);
  assert.equal(await b.pull(w), 2);
  assert.deepEqual(w, reference, 'the server applied both pushes with its optimizer, in arrival order');
  assert.deepEqual(
    await a.push(g1, 0, 0.1, 1),
    { staleness: 2, applied: false },
    'a gradient over the bound is dropped',
  );
  assert.equal(await a.pull(w), 2);

  // elastic: d = α(x − x̃); x̃ += d; x −= d
  const x = w.map((v) => v + 1),
    alpha = 0.25;
  const centre = w.slice();
  await a.elasticExchange(x, alpha);
  const after = new Float32Array(n);
  await b.pull(after);
  for (let i = 0; i < n; i++) {
    const d = Math.fround(alpha * (Math.fround(centre[i]! + 1) - centre[i]!));
    assert.equal(after[i], Math.fround(centre[i]! + d));
    assert.equal(x[i], Math.fround(Math.fround(centre[i]! + 1) - d));
  }

  // turns: rank 1 waits until rank 0 has passed
  const order: string[] = [];
  const second = b.waitTurn(1, 2).then(() => order.push('b'));
  await new Promise((r) => setTimeout(r, 50));
  await a.waitTurn(0, 2);
  order.push('a');
  await a.passTurn();
  await second;
  await b.passTurn();
  assert.deepEqual(order, ['a', 'b']);
  assert.ok(a.takeStats().bytes > 0);

  await a.close();
  await b.close();
  await serving;
  await Promise.all([server.close(), ...clients.map((c) => c.close())]);
});

test('remote parameter server: a device that waits for the others (FINISH, its turn) longer than its receive timeout hears keep-alives and finishes', {
  timeout: 60_000,
}, async () => {
  // receive timeout 1.5 s, keep-alives every 0.5 s; device b keeps device a waiting 4 s at each,
  // pulling every 0.3 s meanwhile (a device that works; the server's own wait for its requests times out too)
  const { server, clients } = await world(2, 1500);
  const params = new Float32Array(5);
  const serving = serveParameterServer(
    server,
    params,
    createOptimizer(jsBackend, { type: 'sgd', lr: 0.1, momentum: 0, nesterov: false, weightDecay: 0 }, 5),
    { keepAliveMs: 500 },
  );
  const [a, b] = clients.map((c) => new RemoteParameterServer(c)) as [RemoteParameterServer, RemoteParameterServer];
  const busy = async () => {
    const w = new Float32Array(5);
    for (const end = Date.now() + 4000; Date.now() < end; ) {
      await b.pull(w);
      await new Promise((r) => setTimeout(r, 300));
    }
  };
  const aWaits = a.waitTurn(1, 2);
  await b.waitTurn(0, 2);
  await busy();
  await b.passTurn();
  await aWaits;
  await a.passTurn();
  const aDone = a.finish();
  await busy();
  await b.finish();
  await aDone;
  await a.close();
  await b.close();
  await serving;
  await Promise.all([server.close(), ...clients.map((c) => c.close())]);
});
