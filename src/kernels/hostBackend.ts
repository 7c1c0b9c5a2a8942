import type { Backend } from './backend.ts';
import { jsBackend } from './js/index.ts';

/**
 * The backend for work on the host's arrays beside a GPU backend's kernels (the loss from the
 * logits, the optimizer on the host's weights, a parameter server's update): the backend itself
 * when its arrays are the host's, else the js reference.
 */
export function hostBackend(backend: Backend): Backend {
  return backend.device ? jsBackend : backend;
}
