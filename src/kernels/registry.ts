import type { Backend } from './backend.ts';

/**
 * Backends register a factory under a name; `getBackend` builds each at most once per thread.
 * Factories may be async (wasm compiles a module) and may report that they are unavailable.
 */
export type BackendFactory = () => Promise<Backend | null>;

const factories = new Map<string, BackendFactory>();
const instances = new Map<string, Promise<Backend | null>>();
/** Preference order for `auto`: fastest first. */
const preference: string[] = [];
const priorities = new Map<string, number>();

export function registerBackend(name: string, factory: BackendFactory, priority: number): void {
  factories.set(name, factory);
  instances.delete(name);
  const at = preference.indexOf(name);
  if (at >= 0) preference.splice(at, 1);
  preference.push(name);
  priorities.set(name, priority);
  preference.sort((a, b) => priorities.get(b)! - priorities.get(a)!);
}

/** The names of the kernel backends this build knows (available or not), most preferred first. */
export function registeredBackends(): string[] {
  return [...preference];
}

/** The backend called `name`, or null when it is registered but not usable on this machine. */
export async function tryBackend(name: string): Promise<Backend | null> {
  const factory = factories.get(name);
  if (!factory) throw new Error(`unknown backend '${name}': choose one of ${[...factories.keys(), 'auto'].join(', ')}`);
  let instance = instances.get(name);
  if (!instance) {
    instance = factory().catch(() => null);
    instances.set(name, instance);
  }
  return instance;
}

/** Resolves a backend name; `auto` picks the fastest available. Throws with the fix when unavailable. */
export async function getBackend(name = 'auto'): Promise<Backend> {
  if (name === 'auto') {
    for (const candidate of preference) {
      const backend = await tryBackend(candidate);
      if (backend) return backend;
    }
    throw new Error('no kernel backend is available');
  }
  const backend = await tryBackend(name);
  if (!backend) throw new Error(`backend '${name}' is not available on this machine; use --backend auto or js`);
  return backend;
}
