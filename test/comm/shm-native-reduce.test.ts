/**
 * The shm transport's native reduction (native/shm/paratrain_shm.c) against the serial float32
 * reference, bit for bit, with both of its kernels (AVX2 where the CPU has it, and the portable
 * one); its argument checks, made before any memory is touched; and the collectives taking it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { loadShmNative, shmNativeUnavailableReason, shmReduceDescription } from '../../src/comm/shm/nativeReduce.ts';
import { NATIVE_MIN_FLOATS } from '../../src/comm/shm/collectives.ts';
import { firstBitDiff, inputFor, runWorld, serialSum } from './helpers.ts';

const native = loadShmNative();
const skip = native ? false : `the native shm reduction is not built: ${shmNativeUnavailableReason()}`;

/** Every source and destination a view into its own SharedArrayBuffer at an odd float offset. */
function views(inputs: Float32Array[], pad: number): Float32Array[] {
  return inputs.map((x, k) => {
    const v = new Float32Array(new SharedArrayBuffer((x.length + pad + 8) * 4), 4 * (1 + (k % 3)), x.length + pad);
    v.set(x, pad);
    return v;
  });
}

for (const isa of ['best', 'plain'] as const) {
  test(`native reduce equals the serial float32 sum (and mean) bit for bit, ${isa} kernel`, { skip }, () => {
    const got = native!.setIsa(isa);
    try {
      if (isa === 'plain') assert.equal(got, 'plain');
      let seed = 0;
      for (const n of [0, 1, 7, 8, 31, 32, 33, 63, 64, 65, 1001, 4133]) {
        for (const nsrc of [1, 2, 3, 5, 9]) {
          for (const div of [0, nsrc]) {
            seed++;
            const inputs = Array.from({ length: nsrc }, (_, r) => inputFor(n, r, seed));
            // specials where there is room: infinities and signed zeros keep their IEEE meaning
            if (n > 3) {
              inputs[0]![1] = Infinity;
              inputs[0]![2] = -0;
              if (nsrc > 1) inputs[1]![2] = -0;
            }
            const want = serialSum(inputs);
            if (div) for (let i = 0; i < n; i++) want[i] = want[i]! / div;
            const start = seed % 5;
            const srcs = views(inputs, start);
            const dsts = views([new Float32Array(n), new Float32Array(n)], start);
            native!.reduce(srcs, dsts, start, n, div);
            for (const d of dsts)
              assert.equal(firstBitDiff(d.subarray(start), want), -1, `n=${n} nsrc=${nsrc} div=${div}`);
            // floats before `start` are not touched
            for (const d of dsts)
              assert.ok(
                d.subarray(0, start).every((v) => v === 0),
                'before start',
              );
            // in place into every source (an allreduce of registered buffers)
            native!.reduce(srcs, srcs, start, n, div);
            for (const s of srcs)
              assert.equal(firstBitDiff(s.subarray(start), want), -1, `in place n=${n} nsrc=${nsrc} div=${div}`);
          }
        }
      }
    } finally {
      native!.setIsa('best');
    }
  });
}

test('native reduce checks its arguments before it writes anything', { skip }, () => {
  const a = Float32Array.of(1, 2, 3),
    b = Float32Array.of(4, 5, 6),
    out = new Float32Array(3);
  const untouched = () => assert.deepEqual([...out], [0, 0, 0]);
  assert.throws(
    () => native!.reduce([a, Float32Array.of(1, 2)], [out], 0, 3, 0),
    /reduce: srcs\[1\] has 2 values, needs 3/,
  );
  assert.throws(
    () => native!.reduce([a, b], [out, new Float32Array(2)], 1, 2, 0),
    /reduce: dsts\[1\] has 2 values, needs 3/,
  );
  assert.throws(
    () => native!.reduce([a, new Float64Array(3) as unknown as Float32Array], [out], 0, 3, 0),
    /srcs\[1\] must be a Float32Array/,
  );
  assert.throws(
    () => native!.reduce(a as unknown as Float32Array[], [out], 0, 3, 0),
    /srcs must be an array of Float32Arrays/,
  );
  assert.throws(() => native!.reduce([], [out], 0, 3, 0), /srcs must hold 1 to 256 arrays, not 0/);
  assert.throws(() => native!.reduce([a], [out], -1, 3, 0), /reduce: start must be a non-negative integer/);
  assert.throws(() => native!.reduce([a], [out], 0, 1.5, 0), /reduce: n must be a non-negative integer/);
  assert.throws(
    () => (native as unknown as { reduce: (...a: unknown[]) => void }).reduce([a], [out], 0, 3),
    /expected 5 arguments/,
  );
  assert.throws(() => native!.setIsa('sse' as 'plain'), /setIsa: the name must be "plain" or "best"/);
  untouched();
  native!.reduce([a, b], [out], 1, 2, 0);
  assert.deepEqual([...out], [0, 7, 9]);
});

test("paratrain info's line names the kernel: native with its ISA, or wasm and why", () => {
  const line = shmReduceDescription();
  if (native) assert.match(line, new RegExp(`^native \\(native/shm, ${native.isa()}\\) for registered buffers`));
  else assert.match(line, /^wasm SIMD \(.+\)$/);
});

/** Registered buffers of each kind whose rank slices reach the native threshold, on 3 ranks: the counters say which kernel ran, the bits are the serial sum's either way. */
async function collectivesWith(env: string | undefined, wasmOnly = false): Promise<Record<string, number>[]> {
  const before = process.env.PARATRAIN_SHM_NATIVE;
  if (env === undefined) delete process.env.PARATRAIN_SHM_NATIVE;
  else process.env.PARATRAIN_SHM_NATIVE = env; // the workers copy the environment when they start
  try {
    const { results } = await runWorld(3, 'collectives', {
      sizes: [3 * NATIVE_MIN_FLOATS + 5],
      kinds: ['sab', 'arena', 'sub', 'wasm'],
      wasmOnly,
    });
    for (const r of results) assert.deepEqual(r.failures, [], r.failures.join('\n'));
    for (const r of results)
      assert.equal(r.data.nativeReduce, !wasmOnly && env !== '0' && native !== null, "useNativeReduce's answer");
    return results.map((r) => r.data.paths as Record<string, number>);
  } finally {
    if (before === undefined) delete process.env.PARATRAIN_SHM_NATIVE;
    else process.env.PARATRAIN_SHM_NATIVE = before;
  }
}

test('the collectives reduce registered buffers with the native kernel where it is built, with wasm under PARATRAIN_SHM_NATIVE=0 or useNativeReduce(false): the same bits', {
  timeout: 120_000,
}, async () => {
  for (const paths of await collectivesWith(undefined)) {
    if (native) {
      // 4 kinds × (allreduce sum, mean, reduceScatter): the outside-arena kinds read peers' buffers straight
      assert.equal(paths.native, 12, JSON.stringify(paths));
      assert.equal(paths.copyThrough, 0, JSON.stringify(paths));
    } else {
      assert.equal(paths.native, 0);
    }
  }
  for (const paths of [...(await collectivesWith('0')), ...(await collectivesWith(undefined, true))]) {
    assert.equal(paths.native, 0, JSON.stringify(paths));
    assert.equal(paths.copyThrough, 9, JSON.stringify(paths));
  }
});

test('build:shm: PARATRAIN_SHM_NATIVE=0 skips it, and a compiler that fails under --optional is one line and exit 0', {
  timeout: 120_000,
}, () => {
  const root = new URL('../../', import.meta.url);
  const { PARATRAIN_SHM_NATIVE: _, ...inherited } = process.env;
  for (const [env, line] of [
    [
      { PARATRAIN_SHM_NATIVE: '0' },
      /^build:shm: skipped \(PARATRAIN_SHM_NATIVE=0\); the shm transport uses its wasm kernel$/,
    ],
    [
      { CC: '/bin/false' },
      /^build:shm: compiling the addon failed .* — continuing without it \(the shm transport uses its wasm kernel\)$/,
    ],
  ] as const) {
    const r = spawnSync(process.execPath, ['native/shm/build.mjs', '--optional'], {
      cwd: root,
      env: { ...inherited, ...env },
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, `${JSON.stringify(env)}: exit ${r.status}\n${r.stdout}${r.stderr}`);
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines.length, 1, r.stdout);
    assert.match(lines[0]!, line);
    assert.equal(r.stderr, '');
  }
});
