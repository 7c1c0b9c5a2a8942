/**
 * Device threads of one process share one wasm memory of 4 GiB (runtime/device/deviceBackend.ts): a model
 * whose flat buffers need more on them is refused before any work, with the ways out.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from '../../src/config/index.ts';
import { checkModelFits } from '../../src/runtime/run/inputChecks.ts';

// 200M parameters with Adam: 4 buffers of 800 MB = 3.2 GB per device thread
const config = (backend: string) =>
  parseConfig(
    {
      model: { input: [20000], layers: [{ dense: { units: 10000 } }] },
      optimizer: { adam: { lr: 0.001 } },
      train: { devices: 2, backend },
    },
    'test config',
  );

test('flat buffers over the 4 GiB the device threads share are refused, naming the ways out', () => {
  assert.throws(
    () => checkModelFits(config('wasm'), { threads: 2, devices: 2 }, Infinity),
    /need 6\.0 GiB on the 2 device threads of this process, more than the 4 GiB of wasm memory they share; .*PARATRAIN_SHM_HEAP=0/,
  );
  checkModelFits(config('wasm'), { threads: 1, devices: 1 }, Infinity); // one thread: its own memory
  checkModelFits(config('wasm'), { threads: 2, devices: 2 }, Infinity, false); // PARATRAIN_SHM_HEAP=0
  checkModelFits(config('js'), { threads: 2, devices: 2 }, Infinity); // js allocates plain SharedArrayBuffers
});
