/**
 * Two "hosts" with their own network stacks: Linux network namespaces joined by a veth pair
 * (iproute2), each running `paratrain launch --nnodes 2 --nproc-per-node 2`, so the job's four
 * processes talk across a real (virtual) link, not loopback. Trains hybrid (and checks it equals
 * the same job on 4 threads) and async (parameter server on host 0). Skipped, saying why, where
 * namespaces cannot be created (not root, no `ip`, no CAP_NET_ADMIN).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { cliArgs, tmpDir } from '../cli/helpers.ts';
import { assertClose, randomPort, runCommand, SECRET, tinyJobConfig, trainHere, weights } from './jobHelpers.ts';

const id = `${process.pid % 100000}`;
const A = `pt-a-${id}`,
  B = `pt-b-${id}`;
const ADDR_A = '10.213.7.1',
  ADDR_B = '10.213.7.2';

function ip(...args: string[]): { ok: boolean; err: string } {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  return { ok: r.status === 0, err: (r.stderr || r.error?.message || '').trim() };
}

/** Creates the two namespaces and the link; returns why not when it cannot. */
function createHosts(): string | null {
  if (process.getuid?.() !== 0) return 'needs root to create network namespaces';
  const first = ip('netns', 'add', A);
  if (!first.ok) return `cannot create a network namespace: ${first.err}`;
  const steps: string[][] = [
    ['netns', 'add', B],
    ['link', 'add', `va${id}`, 'type', 'veth', 'peer', 'name', `vb${id}`],
    ['link', 'set', `va${id}`, 'netns', A],
    ['link', 'set', `vb${id}`, 'netns', B],
    ['-n', A, 'addr', 'add', `${ADDR_A}/24`, 'dev', `va${id}`],
    ['-n', B, 'addr', 'add', `${ADDR_B}/24`, 'dev', `vb${id}`],
    ['-n', A, 'link', 'set', `va${id}`, 'up'],
    ['-n', B, 'link', 'set', `vb${id}`, 'up'],
    ['-n', A, 'link', 'set', 'lo', 'up'],
    ['-n', B, 'link', 'set', 'lo', 'up'],
  ];
  for (const s of steps) {
    const r = ip(...s);
    if (!r.ok) return `ip ${s.join(' ')}: ${r.err}`;
  }
  return null;
}

function removeHosts(): void {
  ip('netns', 'del', A);
  ip('netns', 'del', B);
}

/** `paratrain launch` inside namespace `ns` as node `nodeRank`. */
function launchIn(
  ns: string,
  nodeRank: number,
  port: number,
  args: string[],
): Promise<{ code: number | null; out: string }> {
  return runCommand(
    'ip',
    [
      'netns',
      'exec',
      ns,
      process.execPath,
      ...cliArgs(),
      'launch',
      '--nnodes',
      '2',
      '--node-rank',
      String(nodeRank),
      '--nproc-per-node',
      '2',
      '--master-addr',
      ADDR_A,
      '--master-port',
      String(port),
      '--',
      ...args,
    ],
    { env: { ...process.env, PARATRAIN_SECRET: SECRET, PARATRAIN_OFFLINE: '1' }, timeoutMs: 150_000 },
  );
}

const why = createHosts();
if (why) removeHosts();

test('2 hosts × 2 processes in network namespaces train hybrid (= 4 threads) and async', {
  skip: why ?? false,
  timeout: 400_000,
}, async (t) => {
  t.after(removeHosts);
  const dir = tmpDir();
  const cfg = tinyJobConfig(dir, ', devices: 1');
  for (const strategy of ['hybrid', 'async']) {
    const port = randomPort();
    const args = ['train', cfg, '--strategy', strategy, '--out', join(dir, strategy), '--quiet'];
    const [a, b] = await Promise.all([launchIn(A, 0, port, args), launchIn(B, 1, port, args)]);
    assert.equal(a.code, 0, `${strategy}, host A:\n${a.out}`);
    assert.equal(b.code, 0, `${strategy}, host B:\n${b.out}`);
    assert.match(a.out, /"testAccuracy"/);
  }
  // the same job on 4 threads, in this process
  await trainHere(cfg, join(dir, 'single'), { devices: 4, strategy: 'hybrid' });
  assertClose(
    weights(join(dir, 'hybrid', 'model.safetensors')),
    weights(join(dir, 'single', 'model.safetensors')),
    'hybrid across hosts vs 4 threads',
  );
});
