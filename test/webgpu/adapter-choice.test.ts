/**
 * Which adapter a webgpu device opens (adapterChoice.ts), without a GPU: PARATRAIN_WEBGPU_ADAPTER's
 * forms, the device slot's default over the GPUs, and the one-line errors where a setting cannot be
 * met (an index past the list, a name no adapter has, an adapter behind an identical name); the
 * list Dawn's rejection message carries (adapterList.ts); a device's slot on its host (deviceBackend.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  type ListedAdapter,
  chooseAdapter,
  listText,
  parseAdapterChoice,
} from '../../src/kernels/webgpu/adapterChoice.ts';
import { parseAdapterList } from '../../src/kernels/webgpu/adapterList.ts';
import { BackendSettingError } from '../../src/kernels/registry.ts';
import { hostSlot } from '../../src/runtime/device/deviceBackend.ts';

const vk = (...names: string[]): ListedAdapter[] => names.map((name) => ({ backend: 'vulkan', name }));
const H100 = 'NVIDIA H100 80GB HBM3';
const EIGHT = vk(...Array.from({ length: 8 }, () => H100));
const SWIFTSHADER = 'SwiftShader Device (Subzero)';

/** The error chooseAdapter throws, asserting it is a setting error on one line. */
function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof BackendSettingError, String(err));
    assert.doesNotMatch(err.message, /\n/, 'one line');
    return err.message;
  }
  assert.fail('expected a BackendSettingError');
}

test('PARATRAIN_WEBGPU_ADAPTER: unset or blank by slot, #k an index, anything else a part of a name', () => {
  assert.deepEqual(parseAdapterChoice(undefined), { by: 'slot' });
  assert.deepEqual(parseAdapterChoice('  '), { by: 'slot' });
  assert.deepEqual(parseAdapterChoice('#0'), { by: 'index', index: 0 });
  assert.deepEqual(parseAdapterChoice(' #12 '), { by: 'index', index: 12 });
  assert.deepEqual(parseAdapterChoice('H100'), { by: 'name', name: 'H100' });
  for (const bad of ['#', '#-1', '#1.5', '#one', '# 2'])
    assert.match(
      refusal(() => parseAdapterChoice(bad)),
      new RegExp(
        `^PARATRAIN_WEBGPU_ADAPTER=${bad.replace(/[.+]/g, '\\$&')}: an adapter index is # and a whole number, #0 for the first adapter`,
      ),
    );
});

test('by slot: device slot s opens GPU s mod GPUs, software adapters only where there is no GPU', () => {
  const mixed = vk('NVIDIA GeForce RTX 4090', 'AMD Radeon RX 7900 XTX (RADV NAVI31)', SWIFTSHADER);
  const slots = [0, 1, 2, 3].map((s) => chooseAdapter({ by: 'slot' }, mixed, s).index);
  assert.deepEqual(slots, [0, 1, 0, 1], 'SwiftShader is left out beside GPUs');
  const software = vk('llvmpipe (LLVM 15.0.7, 256 bits)', SWIFTSHADER);
  assert.deepEqual(
    [0, 1, 2].map((s) => chooseAdapter({ by: 'slot' }, software, s).index),
    [0, 1, 0],
  );
  assert.deepEqual(chooseAdapter({ by: 'slot' }, vk(SWIFTSHADER), 5), { index: 0, name: SWIFTSHADER });
});

test('#k and names open what Dawn opens: the first adapter whose name contains the one asked for', () => {
  const two = vk('NVIDIA GeForce RTX 4090', 'NVIDIA RTX A6000');
  assert.deepEqual(chooseAdapter({ by: 'index', index: 1 }, two, 0), { index: 1, name: 'NVIDIA RTX A6000' });
  assert.deepEqual(chooseAdapter({ by: 'name', name: 'A6000' }, two, 0), { index: 1, name: 'NVIDIA RTX A6000' });
  assert.deepEqual(chooseAdapter({ by: 'name', name: 'NVIDIA' }, two, 1), {
    index: 0,
    name: 'NVIDIA GeForce RTX 4090',
  });
  // a setting holds for every device of the process, whatever its slot
  assert.equal(chooseAdapter({ by: 'index', index: 0 }, EIGHT, 7).index, 0);
});

test('an index past the list and a name no adapter has are errors that list the adapters and name the fix', () => {
  assert.equal(
    refusal(() => chooseAdapter({ by: 'index', index: 1 }, vk(SWIFTSHADER), 0)),
    `PARATRAIN_WEBGPU_ADAPTER=#1 is past the list: this process sees 1 adapter: #0 '${SWIFTSHADER}'. ` +
      'Use #0 or a name, or unset it to spread the devices over the GPUs (docs/backends.md, "Several GPUs")',
  );
  assert.match(
    refusal(() => chooseAdapter({ by: 'index', index: 8 }, EIGHT, 0)),
    /=#8 is past the list: this process sees 8 adapters: #0–#7 'NVIDIA H100 80GB HBM3'\. Use #0 to #7 or a name/,
  );
  assert.equal(
    refusal(() => chooseAdapter({ by: 'name', name: 'A100' }, EIGHT, 0)),
    `PARATRAIN_WEBGPU_ADAPTER=A100 matches no adapter's name; this process sees 8 adapters: #0–#7 '${H100}'. ` +
      'Set it to a part of one of those names or to an #index, or unset it (docs/backends.md, "Several GPUs")',
  );
});

test('identical GPUs: one process reaches only the first, so another slot or index is an error naming the way out', () => {
  assert.deepEqual(chooseAdapter({ by: 'slot' }, EIGHT, 0), { index: 0, name: H100 });
  assert.deepEqual(chooseAdapter({ by: 'slot' }, EIGHT, 8), { index: 0, name: H100 }, 'slot 8 wraps to GPU 0');
  assert.equal(
    refusal(() => chooseAdapter({ by: 'slot' }, EIGHT, 3)),
    `the device in slot 3 of this host (LOCAL_RANK × devices per process + thread) maps to adapter #3 '${H100}', which this process cannot open: ` +
      `Dawn's Node bindings open the first adapter whose name contains the one asked for, #0 here (this process sees 8 adapters: #0–#7 '${H100}'). ` +
      'Give each process one GPU and show it only that one (docs/backends.md, "Several GPUs"), ' +
      "or set PARATRAIN_WEBGPU_ADAPTER=#0 to put this process's devices on #0",
  );
  assert.match(
    refusal(() => chooseAdapter({ by: 'index', index: 2 }, EIGHT, 0)),
    /^PARATRAIN_WEBGPU_ADAPTER=#2 names adapter #2 'NVIDIA H100 80GB HBM3', which this process cannot open: .* #0 here/,
  );
  // a name contained in an earlier one is as unreachable as an identical one
  const nested = vk('NVIDIA H100 PCIe', 'NVIDIA H100');
  assert.match(
    refusal(() => chooseAdapter({ by: 'slot' }, nested, 1)),
    /maps to adapter #1 'NVIDIA H100', which this process cannot open/,
  );
  // two kinds of GPU, two of each: the first of each kind is reachable, the second is not
  const pairs = vk('NVIDIA RTX A6000', 'NVIDIA RTX A6000', 'NVIDIA GeForce RTX 4090', 'NVIDIA GeForce RTX 4090');
  assert.deepEqual(
    [0, 2].map((s) => chooseAdapter({ by: 'slot' }, pairs, s).index),
    [0, 2],
  );
  assert.match(
    refusal(() => chooseAdapter({ by: 'slot' }, pairs, 3)),
    /maps to adapter #3 .* #2 here/,
  );
});

test('the list reads identical neighbours as one range', () => {
  assert.equal(listText(vk('A', 'B', 'B', 'B', 'A')), "#0 'A', #1–#3 'B', #4 'A'");
  assert.equal(listText([]), '');
});

test("Dawn's rejection message gives the adapters in order; another message is not a list", () => {
  const message =
    "no suitable backends found\nAvailable adapters:\n * backend: 'vulkan', name: 'SwiftShader Device (Subzero)'\n" +
    " * backend: 'vulkan', name: 'NVIDIA GeForce RTX 4090'";
  assert.deepEqual(parseAdapterList(message), vk(SWIFTSHADER, 'NVIDIA GeForce RTX 4090'));
  assert.deepEqual(parseAdapterList("no adapter  with name 'x' found\nAvailable adapters:"), []);
  assert.equal(parseAdapterList("unrecognised backend 'cuda'\nPossible backends : 'null', 'vulkan'"), undefined);
});

test("a device's slot on its host: LOCAL_RANK × devices per process + thread index", () => {
  const launch = { RANK: '5', WORLD_SIZE: '8', LOCAL_RANK: '1', MASTER_ADDR: '10.0.0.1' };
  assert.equal(hostSlot({ rank: 1, size: 2 }, launch), 3);
  const mpirun = { OMPI_COMM_WORLD_RANK: '3', OMPI_COMM_WORLD_SIZE: '4', OMPI_COMM_WORLD_LOCAL_RANK: '3' };
  assert.equal(hostSlot({ rank: 0, size: 1 }, { ...mpirun, OMPI_COMM_WORLD_LOCAL_SIZE: '4' }), 3);
  const srun = { SLURM_PROCID: '6', SLURM_NTASKS: '8', SLURM_LOCALID: '2', SLURM_JOB_NODELIST: 'node[01-02]' };
  assert.equal(hostSlot({ rank: 3, size: 4 }, srun), 11);
  assert.equal(hostSlot({ rank: 1, size: 2 }, {}), 1, 'one process: the thread index');
});
