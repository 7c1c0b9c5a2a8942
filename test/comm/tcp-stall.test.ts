/**
 * The stall inspector on tcp (src/comm/tcp/whereabouts.ts): a rank whose wait for a peer passes
 * stallMs asks every peer where it is and logs once which rank has not arrived and where each of
 * the others is (step, call) — whether the late rank's event loop is free to answer or busy.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { describe as summary, runJob } from './tcp/harness.ts';

// the probe's answer window is stallMs / 2: 400 ms lets an idle rank answer on a loaded machine (150 ms did not, 2 runs in 6)
const STALL_MS = 800;

for (const busy of [false, true]) {
  test(`tcp stall inspector: 3 ranks, rank 2 late (${busy ? 'busy computing' : 'idle'}) to allreduce #2 and to a send; the waiting ranks name it once per stall`, {
    timeout: 60_000,
  }, async () => {
    const results = await runJob({
      worldSize: 3,
      scenario: 'stall-late-rank',
      options: () => ({ stallMs: STALL_MS }),
      params: { late: 2, sleepMs: 2500, busy },
    });
    for (const r of results) assert.ok(r.ok, summary(results));
    const stalls = (r: number) => results[r]!.data.stalls as string[];
    assert.deepEqual(stalls(2), [], 'the late rank waited for nobody');
    const [coll, p2p, ...rest] = stalls(0);
    assert.equal(rest.length, 0, `rank 0 warns once per stall: ${stalls(0).join('\n')}`);
    assert.match(
      coll!,
      /^rank 0 has waited \d\.\d s in allreduce #2 of 11072 floats at step 2 for rank 2 \(where the others are — /,
      coll,
    );
    assert.match(coll!, /rank 1: allreduce #2 of 11072 floats at step 2/, coll);
    if (busy) assert.match(coll!, /rank 2: no answer within \d+ ms/, coll);
    else assert.match(coll!, /rank 2: last seen in allreduce #1 of 11072 floats at step 2\)$/, coll);
    // the send/recv wait: rank 0 waits for rank 2's message; rank 1 is already in the barrier
    assert.match(
      p2p!,
      /^rank 0 has waited \d\.\d s in recv from rank 2 with tag 7 of 10 floats at step 3 for rank 2 /,
      p2p,
    );
    assert.match(p2p!, /rank 1: barrier #3 at step 3/, p2p);
    // rank 1 is held up too (its left neighbour, rank 0, waits for rank 2): it names rank 2 in the allreduce
    assert.match(
      stalls(1)[0]!,
      /^rank 1 has waited \d\.\d s in allreduce #2 of 11072 floats at step 2 for rank 2 /,
      stalls(1).join('\n'),
    );
  });
}

test('tcp stall inspector: off by default, and a wait shorter than stallMs reports nothing', {
  timeout: 60_000,
}, async () => {
  const off = await runJob({
    worldSize: 2,
    scenario: 'stall-late-rank',
    params: { late: 1, sleepMs: 400, busy: false },
  });
  const quick = await runJob({
    worldSize: 2,
    scenario: 'stall-late-rank',
    options: () => ({ stallMs: 5000 }),
    params: { late: 1, sleepMs: 400, busy: false },
  });
  for (const r of [...off, ...quick]) {
    assert.ok(r.ok, summary([...off, ...quick]));
    assert.deepEqual(r.data.stalls, []);
  }
});
