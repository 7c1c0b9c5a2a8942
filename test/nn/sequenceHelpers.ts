import { registeredBackends, tryBackend } from '../../src/kernels/index.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import { TRAIN_CTX } from './gradcheck.ts';
import type { ForwardContext } from '../../src/nn/layer.ts';

/** Every backend that loads here: js and wasm always, native when its addon is built. */
export async function availableBackends(): Promise<Backend[]> {
  const all = await Promise.all(registeredBackends().map((n) => tryBackend(n)));
  return all.filter((b): b is Backend => b !== null).sort((a, b) => a.name.localeCompare(b.name));
}

/** A training context whose batch has these per-sample lengths. */
export const withLengths = (...lengths: number[]): ForwardContext => ({
  ...TRAIN_CTX,
  lengths: Int32Array.from(lengths),
});
