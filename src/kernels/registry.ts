import type { Backend } from './backend.ts';

/**
 * Backends register a factory under a name; `getBackend` builds each at most once per thread.
 * Factories may be async (wasm compiles a module) and may report that they are unavailable.
 */
export type BackendFactory = () => Promise<Backend | null>;

/**
 * What a factory throws for a setting the user must fix (a malformed environment variable): the
 * error reaches the user, where any other failure of a factory makes the backend unavailable and
 * `auto` goes on to the next one.
 */
export class BackendSettingError extends Error {}

const factories = new Map<string, BackendFactory>();
const reasons = new Map<string, () => string | undefined>();
const instances = new Map<string, Promise<Backend | null>>();
/** Preference order for `auto`: fastest first. */
const preference: string[] = [];
const priorities = new Map<string, number>();

/**
 * Registers `name`; `auto` tries backends by descending `priority`. `unavailable` says why the
 * factory gave null (read after it ran), for `paratrain info`.
 */
export function registerBackend(
  name: string,
  factory: BackendFactory,
  priority: number,
  unavailable?: () => string | undefined,
): void {
  factories.set(name, factory);
  if (unavailable) reasons.set(name, unavailable);
  else reasons.delete(name);
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

/** Why backend `name` is unavailable on this machine (after `tryBackend(name)` gave null), when it says. */
export function backendUnavailableReason(name: string): string | undefined {
  return reasons.get(name)?.();
}

/** The backend called `name`, or null when it is registered but not usable on this machine. */
export async function tryBackend(name: string): Promise<Backend | null> {
  const factory = factories.get(name);
  if (!factory) throw new Error(`unknown backend '${name}': choose one of ${[...factories.keys(), 'auto'].join(', ')}`);
  let instance = instances.get(name);
  if (!instance) {
    instance = factory().catch((err: unknown) => {
      if (err instanceof BackendSettingError) throw err;
      return null;
    });
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
