/**
 * Opening adapters, each case in a child process (twoAdaptersFixture.ts; this process opens no Dawn
 * instance, whose teardown at exit may crash a process that opened several). On SwiftShader (one
 * adapter): Dawn lists it, `#0` opens it, a part of its name and a slot past it choose it, `#1` and a
 * name it lacks are errors listing it. Then, shown two identical SwiftShader adapters (two copies
 * of its driver), what identical GPUs do: slot 0 opens #0, slot 1 and `#1` are errors naming the
 * fix, `#0` puts slot 1 on #0, a 2-device run stops on device 1 with that error, and `paratrain
 * info` lists both.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { chooseAdapter, parseAdapterChoice } from '../../src/kernels/webgpu/adapterChoice.ts';

const root = new URL('../..', import.meta.url).pathname;
const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
const SWIFTSHADER_LIB = '/usr/lib/chromium/libvk_swiftshader.so';
const NAME = 'SwiftShader Device (Subzero)';

test('one adapter: it is listed, #0 opens it, a part of its name and any slot choose it; #1 and a missing name say what there is', (t) => {
  if (!swiftShader(t)) return;
  const env: NodeJS.ProcessEnv = { ...process.env, VK_ICD_FILENAMES: SWIFTSHADER_ICD };
  delete env.VK_DRIVER_FILES;
  delete env.PARATRAIN_WEBGPU_ADAPTER;
  const got = JSON.parse(child(env, ['test/webgpu/twoAdaptersFixture.ts', 'one']).trim().split('\n').pop()!);
  const listed = got.opened.adapters;
  assert.deepEqual(listed, [{ backend: 'vulkan', name: NAME }]);
  assert.equal(got.opened.name, NAME);
  assert.equal(got.opened.software, true);
  // the forms on the list Dawn gave, without opening each
  assert.deepEqual(chooseAdapter(parseAdapterChoice('#0'), listed, 3), { index: 0, name: NAME });
  assert.deepEqual(chooseAdapter(parseAdapterChoice('Subzero'), listed, 0), { index: 0, name: NAME });
  assert.deepEqual(chooseAdapter(parseAdapterChoice(undefined), listed, 5), { index: 0, name: NAME }, 'slot 5 mod 1');
  assert.deepEqual(got['#1'], {
    type: 'BackendSettingError',
    error:
      `PARATRAIN_WEBGPU_ADAPTER=#1 is past the list: this process sees 1 adapter: #0 '${NAME}'. ` +
      'Use #0 or a name, or unset it to spread the devices over the GPUs (docs/backends.md, "Several GPUs")',
  });
  assert.equal(got.H100.type, 'BackendSettingError');
  assert.match(
    got.H100.error,
    /^PARATRAIN_WEBGPU_ADAPTER=H100 matches no adapter's name; this process sees 1 adapter: #0 'SwiftShader/,
  );
});

/** Whether SwiftShader is installed; else the test skips (or, where GPU tests are required, fails). */
function swiftShader(t: TestContext): boolean {
  if (existsSync(SWIFTSHADER_ICD) && existsSync(SWIFTSHADER_LIB)) return true;
  if (process.env.PARATRAIN_REQUIRE_GPU_TESTS === '1')
    throw new Error(`webgpu tests required, but ${SWIFTSHADER_LIB} is missing`);
  t.skip(`no SwiftShader (${SWIFTSHADER_LIB}; Debian package chromium)`);
  return false;
}

/** The environment of a child shown two identical SwiftShader adapters, or undefined after skipping. */
function twoSwiftShaders(t: TestContext): NodeJS.ProcessEnv | undefined {
  if (!swiftShader(t)) return undefined;
  // a second copy of the driver: the Vulkan loader loads each path once, so this is a second adapter
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-two-swiftshaders-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const lib = join(dir, 'libvk_swiftshader.so');
  copyFileSync(SWIFTSHADER_LIB, lib);
  const icd = join(dir, 'vk_swiftshader_icd.json');
  writeFileSync(
    icd,
    JSON.stringify({ file_format_version: '1.0.0', ICD: { library_path: lib, api_version: '1.0.5' } }),
  );
  const env: NodeJS.ProcessEnv = { ...process.env, VK_ICD_FILENAMES: `${SWIFTSHADER_ICD}:${icd}` };
  delete env.VK_DRIVER_FILES;
  delete env.PARATRAIN_WEBGPU_ADAPTER;
  return env;
}

function child(env: NodeJS.ProcessEnv, args: string[]): string {
  const r = spawnSync(process.execPath, ['--import', 'tsx', ...args], {
    cwd: root,
    env,
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

const IDENTICAL =
  `Dawn's Node bindings open the first adapter whose name contains the one asked for, #0 here ` +
  `(this process sees 2 adapters: #0–#1 '${NAME}'). Give each process one GPU and show it only that one ` +
  `(docs/backends.md, "Several GPUs"), or set PARATRAIN_WEBGPU_ADAPTER=#0 to put this process's devices on #0`;

test('identical adapters: slot 0 opens #0; slot 1 and #1 are errors naming the fix; #0 serves every slot', async (t) => {
  const env = twoSwiftShaders(t);
  if (!env) return;
  const got = JSON.parse(child(env, ['test/webgpu/twoAdaptersFixture.ts', 'open']).trim().split('\n').pop()!);
  assert.deepEqual(got['unset slot 0'], { index: 0, adapters: 2 });
  assert.deepEqual(got['#0 slot 1'], { index: 0, adapters: 2 });
  assert.equal(
    got['unset slot 1'].error,
    `the device in slot 1 of this host (LOCAL_RANK × devices per process + thread) maps to adapter #1 '${NAME}', which this process cannot open: ${IDENTICAL}`,
  );
  assert.equal(
    got['#1 slot 0'].error,
    `PARATRAIN_WEBGPU_ADAPTER=#1 names adapter #1 '${NAME}', which this process cannot open: ${IDENTICAL}`,
  );
});

test('identical adapters: a 2-device run stops on device 1, which its own thread put in slot 1; info lists both', async (t) => {
  const env = twoSwiftShaders(t);
  if (!env) return;
  const run = JSON.parse(child(env, ['test/webgpu/twoAdaptersFixture.ts', 'train']).trim().split('\n').pop()!);
  assert.equal(
    run.error,
    `device 1 failed: the device in slot 1 of this host (LOCAL_RANK × devices per process + thread) maps to adapter #1 '${NAME}', which this process cannot open: ${IDENTICAL}`,
  );
  const info = child(env, ['src/cli/main.ts', 'info']);
  assert.match(
    info,
    /^webgpu +available — SwiftShader Device \(Subzero\) .*; adapter #0 of the 2 this process sees: #0–#1 'SwiftShader Device \(Subzero\)'$/m,
  );
});
