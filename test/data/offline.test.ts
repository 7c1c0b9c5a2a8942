/**
 * An offline machine falls back to the shipped subset at once: a name that does not resolve, a
 * refused connection or no network interface at all costs no wait, and a name server that never
 * answers costs at most the lookup bound. The network is injected (a resolver, the interfaces, a
 * loopback address): the tests never reach the real one.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo, LookupFunction } from 'node:net';
import type { NetworkInterfaceInfo } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadFashionMnist, type LoadFashionMnistOptions } from '../../src/data/fashionMnist.ts';
import { tmpDir } from './helpers.ts';

const ONLINE = () => ({
  eth0: [{ address: '10.0.0.2', internal: false, family: 'IPv4' } as NetworkInterfaceInfo],
  lo: [{ address: '127.0.0.1', internal: true, family: 'IPv4' } as NetworkInterfaceInfo],
});

/** Loads with an empty cache and no system copy, timing it; the notes it logs. */
async function fallBack(o: Partial<LoadFashionMnistOptions>) {
  const lines: string[] = [];
  const started = performance.now();
  const { source } = await loadFashionMnist({
    systemDirs: [],
    cacheDir: join(tmpDir(), 'cache'),
    interfaces: ONLINE,
    log: (m) => lines.push(m),
    ...o,
  });
  return { source, lines, ms: performance.now() - started };
}

/** A resolver that fails at once with `code`, counting its calls. */
function failingLookup(code: string): { lookup: LookupFunction; calls: () => number } {
  let calls = 0;
  const lookup = ((hostname: string, _o: unknown, callback: (err: NodeJS.ErrnoException) => void) => {
    calls++;
    const err: NodeJS.ErrnoException = new Error(`getaddrinfo ${code} ${hostname}`);
    err.code = code;
    process.nextTick(() => callback(err));
  }) as unknown as LookupFunction;
  return { lookup, calls: () => calls };
}

for (const code of ['ENOTFOUND', 'EAI_AGAIN']) {
  test(`a name that does not resolve (${code}): the shipped subset at once, one line saying why and how to skip`, async () => {
    const resolver = failingLookup(code);
    const r = await fallBack({ download: { lookup: resolver.lookup } });
    assert.equal(resolver.calls(), 1, 'one lookup: the first failure ends the download');
    assert.ok(r.ms < 1000, `fell back after ${r.ms.toFixed(0)} ms`);
    assert.match(r.source, /^shipped subset /);
    assert.equal(r.lines.length, 1, r.lines.join('\n'));
    assert.match(r.lines[0]!, new RegExp(`^fashion-mnist: download of .* failed: getaddrinfo ${code} `));
    assert.match(r.lines[0]!, /using the shipped subset instead \(PARATRAIN_OFFLINE=1 skips the download\)$/);
  });
}

test('a refused connection: the shipped subset at once', async () => {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  const r = await fallBack({ url: `http://127.0.0.1:${port}/` });
  assert.ok(r.ms < 1000, `fell back after ${r.ms.toFixed(0)} ms`);
  assert.match(r.lines[0]!, /failed: connect ECONNREFUSED 127\.0\.0\.1:\d+; using the shipped subset instead/);
});

test('a name server that never answers: the lookup is bounded', async () => {
  let calls = 0;
  const silent = (() => {
    calls++;
  }) as unknown as LookupFunction;
  const r = await fallBack({ download: { lookup: silent, lookupTimeoutMs: 150 } });
  assert.equal(calls, 1);
  assert.ok(r.ms < 1000, `fell back after ${r.ms.toFixed(0)} ms`);
  assert.match(
    r.lines[0]!,
    /failed: no answer from the name server for [\w.-]+ within 150 ms; using the shipped subset/,
  );
});

test('no network interface but loopback: no download is tried', async () => {
  const resolver = failingLookup('ENOTFOUND');
  const r = await fallBack({
    download: { lookup: resolver.lookup },
    interfaces: () => ({ lo: [{ address: '127.0.0.1', internal: true, family: 'IPv4' } as NetworkInterfaceInfo] }),
  });
  assert.equal(resolver.calls(), 0, 'the network is not touched');
  assert.ok(r.ms < 1000, `fell back after ${r.ms.toFixed(0)} ms`);
  assert.match(r.source, /^shipped subset /);
  assert.deepEqual(r.lines, [
    'fashion-mnist: no network interface is up, so nothing is downloaded; using the shipped subset',
  ]);
});
