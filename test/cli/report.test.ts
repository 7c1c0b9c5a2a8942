import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { runCli, stderrLines, tmpDir, writeSyntheticRun } from './helpers.ts';

test('paratrain report RUN_DIR…: a table on stdout and report.html in the first run directory', {
  timeout: 60_000,
}, async () => {
  const dir = tmpDir('paratrain-cli-report-');
  try {
    writeSyntheticRun(join(dir, 'bsp'), { strategy: 'bsp', devices: 4, slow: { 3: 2 } });
    writeSyntheticRun(join(dir, 'async'), { strategy: 'async', devices: 4 });
    const r = await runCli(['report', join(dir, 'bsp'), join(dir, 'async')]);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split('\n');
    assert.match(
      lines[0]!,
      /^strategy +devices +test accuracy +wall time +samples\/s +mean idle +mean staleness +stragglers +run$/,
    );
    assert.match(lines[2]!, /^bsp +4 +75\.00% .* device 3 +bsp ×4$/);
    assert.match(lines[3]!, /^async +4 +75\.00% .* 1\.00 +— +async ×4$/);
    assert.equal(lines.at(-1), `report: ${join(dir, 'bsp', 'report.html')}`);
    assert.ok(existsSync(join(dir, 'bsp', 'report.html')));
    const out = join(dir, 'both.html');
    const again = await runCli([
      'report',
      join(dir, 'bsp'),
      join(dir, 'async'),
      '--out',
      out,
      '--title',
      'BSP vs async',
    ]);
    assert.equal(again.code, 0, again.stderr);
    assert.match(readFileSync(out, 'utf8'), /<title>BSP vs async<\/title>/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('paratrain report: bad run directories give one line naming the file, exit 1', { timeout: 60_000 }, async () => {
  const dir = tmpDir('paratrain-cli-report-');
  try {
    mkdirSync(join(dir, 'empty'));
    const corrupt = writeSyntheticRun(join(dir, 'corrupt'));
    appendFileSync(corrupt, 'not json\n');
    const badLineNo = readFileSync(corrupt, 'utf8').trimEnd().split('\n').length;
    const [missing, noMetrics, badLine, foreign] = await Promise.all([
      runCli(['report', join(dir, 'missing')]),
      runCli(['report', join(dir, 'empty')]),
      runCli(['report', join(dir, 'corrupt')]),
      runCli(['report', join(dir, 'corrupt'), '--out', corrupt]),
    ]);
    const expect: [typeof missing, string][] = [
      [missing, `paratrain: run directory ${join(dir, 'missing')} does not exist`],
      [
        noMetrics,
        `paratrain: run directory ${join(dir, 'empty')} has no metrics.jsonl; is it a paratrain run directory?`,
      ],
      [badLine, `paratrain: metrics file ${corrupt}: line ${badLineNo} is not valid JSON`],
    ];
    for (const [r, start] of expect) {
      assert.equal(r.code, 1);
      const lines = stderrLines(r);
      assert.equal(lines.length, 1, r.stderr);
      assert.ok(lines[0]!.startsWith(start), `${lines[0]} should start with ${start}`);
      assert.equal(r.stdout, '');
    }
    assert.equal(foreign.code, 1);
    assert.match(
      stderrLines(foreign)[0]!,
      /^paratrain: metrics file .*is not valid JSON/,
      'the corrupt file is found before anything is written',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
