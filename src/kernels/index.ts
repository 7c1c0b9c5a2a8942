import { registerBackend } from './registry.ts';
import { jsBackend } from './js/index.ts';
import { createWasmBackend } from './wasm/index.ts';

// The plain-JS reference is always present; faster backends register with higher priority
// ('auto' takes the fastest that loads).
registerBackend('js', async () => jsBackend, 0);
registerBackend('wasm', () => createWasmBackend(), 10);

export { getBackend, tryBackend, registeredBackends } from './registry.ts';
export type { Backend } from './backend.ts';
