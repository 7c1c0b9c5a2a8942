import type { Backend } from '../../kernels/backend.ts';
import { getBackend } from '../../kernels/index.ts';

/**
 * The backend eval, predict and transcribe compute on: the one named (a checkpoint's config names
 * the one it trained on), except a GPU backend, whose outputs reach the host only at a step's
 * explicit points: inference then runs on the fastest CPU backend (docs/backends.md).
 */
export async function inferenceBackend(name: string): Promise<Backend> {
  const backend = await getBackend(name);
  return backend.device ? getBackend('auto') : backend;
}
