import { registerBackend } from './registry.ts';
import { jsBackend } from './js/index.ts';

// The plain-JS reference is always present; faster backends register with higher priority.
registerBackend('js', async () => jsBackend, 0);

export { getBackend, tryBackend, registeredBackends } from './registry.ts';
export type { Backend } from './backend.ts';
