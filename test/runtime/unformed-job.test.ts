/**
 * A job of several processes refused when its processes meet (their data differ) leaves no run
 * directory behind, so the same --out runs again without --force; a resumed run refused the same
 * way keeps its directory whole. Then what files/unmakeRunDir.ts takes back, case by case: only
 * what the run made, and runs/latest back to the run before.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { tmpDir } from '../cli/helpers.ts';
import { cutSubset, randomPort, SECRET, tinyJobConfig } from './jobHelpers.ts';
import { loadConfig, train, type RunConfig, type TrainResult } from '../../src/index.ts';
import { latestName, makeRunDir } from '../../src/runtime/files/runDir.ts';
import { unmakeRunDir } from '../../src/runtime/files/unmakeRunDir.ts';

/** A 2-process job run in this process (process p with configs[p]); process 0's notes go to `notes`. */
function job(
  configs: [RunConfig, RunConfig],
  where: { out: string } | { resume: string },
  notes: string[],
  failAt?: { rank: number; step: number },
): Promise<PromiseSettledResult<TrainResult>[]> {
  process.env.PARATRAIN_SECRET ??= SECRET;
  const masterPort = randomPort();
  return Promise.allSettled(
    configs.map((config, rank) =>
      train(config, {
        ...where,
        ...(failAt ? { failAt } : {}),
        timeoutMs: 15_000,
        log: rank === 0 ? (m: string) => notes.push(m) : undefined,
        processes: { rank, worldSize: 2, masterAddr: '127.0.0.1', masterPort },
      }),
    ),
  );
}

const reason = (r: PromiseSettledResult<unknown>) => (r.status === 'rejected' ? String(r.reason) : 'it trained');

/** The job's config, and the same reading 60 training samples (a directory that differs only in data.dir). */
function configs(extra = ''): { same: RunConfig; other: RunConfig } {
  const dir = tmpDir();
  const other = join(dir, 'other-data');
  mkdirSync(other);
  cutSubset(other, 60);
  const same = loadConfig(tinyJobConfig(dir, extra));
  return { same, other: { ...same, data: { ...same.data, dir: other } } as RunConfig };
}

test('a 2-process job refused at rendezvous (data differ) leaves no run directory; the retry with the same --out trains', {
  timeout: 60_000,
}, async () => {
  const { same, other } = configs();
  const out = join(tmpDir(), 'run');
  const notes: string[] = [];
  const refused = await job([same, other], { out }, notes);
  for (const r of refused) assert.match(reason(r), /process 1's training data differs from process 0's/);
  assert.ok(!existsSync(out), `no run directory: ${existsSync(out) ? readdirSync(out).join(', ') : ''}`);
  assert.ok(
    notes.some((n) => n === `the job did not form: removed run directory ${out} (this run made it)`),
    `process 0 says so in one line:\n${notes.join('\n')}`,
  );

  const retry = await job([same, same], { out }, []);
  for (const r of retry) assert.equal(r.status, 'fulfilled', reason(r));
  const result = (retry[0] as PromiseFulfilledResult<TrainResult>).value;
  assert.equal(result.runDir, out);
  assert.ok(existsSync(join(out, 'model.safetensors')));
  assert.ok(!readdirSync(out).includes('.lock'), 'the lock is released');
});

test('a resumed 2-process run refused at rendezvous keeps its directory: nothing of it is taken back', {
  timeout: 60_000,
}, async () => {
  const { same, other } = configs(', checkpointEvery: { steps: 2 }');
  const out = join(tmpDir(), 'run');
  const failed = await job([same, same], { out }, [], { rank: 1, step: 5 });
  assert.ok(
    failed.every((r) => r.status === 'rejected') && failed.some((r) => /injected failure at step 5/.test(reason(r))),
    failed.map(reason).join('\n'),
  );
  const before = readdirSync(out, { recursive: true }).map(String).sort();
  assert.ok(
    before.some((f) => f.startsWith(join('checkpoints', 'step-'))),
    before.join(', '),
  );

  const notes: string[] = [];
  const refused = await job([same, other], { resume: out }, notes);
  assert.ok(
    refused.every((r) => r.status === 'rejected') && refused.some((r) => /training data differs/.test(reason(r))),
    refused.map(reason).join('\n'),
  );
  const after = readdirSync(out, { recursive: true }).map(String).sort();
  for (const f of before) assert.ok(after.includes(f), `${f} kept (now: ${after.join(', ')})`);
  assert.ok(!notes.some((n) => /did not form/.test(n)), notes.join('\n'));
});

test('unmakeRunDir takes back only what the run made', () => {
  const dir = tmpDir();
  // a directory this run made: removed, its files with it
  const made = makeRunDir({ out: join(dir, 'new') });
  assert.equal(made.before, 'none');
  writeFileSync(join(made.dir, 'config.yaml'), 'x');
  assert.equal(unmakeRunDir(made, ['config.yaml']), `removed run directory ${made.dir} (this run made it)`);
  assert.ok(!existsSync(made.dir));

  // one that was there, empty: the run's files go, the directory stays
  mkdirSync(join(dir, 'empty'));
  const empty = makeRunDir({ out: join(dir, 'empty') });
  assert.equal(empty.before, 'empty');
  writeFileSync(join(empty.dir, 'config.yaml'), 'x');
  unmakeRunDir(empty, ['config.yaml']);
  assert.deepEqual(readdirSync(empty.dir), []);

  // files kept by --force: nothing is removed
  mkdirSync(join(dir, 'full'));
  writeFileSync(join(dir, 'full', 'notes.txt'), 'mine');
  const full = makeRunDir({ out: join(dir, 'full'), force: true });
  assert.equal(full.before, 'files');
  writeFileSync(join(full.dir, 'config.yaml'), 'x');
  unmakeRunDir(full, ['config.yaml']);
  assert.deepEqual(readdirSync(full.dir).sort(), ['config.yaml', 'notes.txt']);

  // a file the run did not write: left in place, and said so
  const odd = makeRunDir({ out: join(dir, 'odd') });
  writeFileSync(join(odd.dir, 'other.txt'), 'x');
  assert.match(
    unmakeRunDir(odd, ['config.yaml']),
    /left run directory .*odd in place \(it holds files this run did not write\)/,
  );
  assert.deepEqual(readdirSync(odd.dir), ['other.txt']);

  // a timestamped directory: runs/latest names the run before again (or nothing, when there was none)
  const root = join(dir, 'runs');
  const first = makeRunDir({ root });
  const second = makeRunDir({ root });
  assert.equal(latestName(root), basename(second.dir));
  unmakeRunDir(second, []);
  assert.ok(!existsSync(second.dir));
  assert.equal(latestName(root), basename(first.dir));
  unmakeRunDir(first, []);
  assert.equal(latestName(root), null);
});
