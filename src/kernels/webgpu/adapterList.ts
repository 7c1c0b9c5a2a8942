/**
 * The adapters Dawn's Node bindings can open in this process, in their order. The bindings have no
 * call that lists them, but a request for an adapter name that matches none is rejected with the
 * list (`Available adapters:` then ` * backend: '…', name: '…'` per adapter, Dawn's
 * src/dawn/node/binding/GPU.cpp); the names are those that `create(['adapter=…'])` matches.
 */
import type { Dawn } from './dawn.ts';
import type { ListedAdapter } from './adapterChoice.ts';

/** What every request for an adapter asks: the list's order depends on it, so listing and opening agree. */
export const ADAPTER_OPTIONS: GPURequestAdapterOptions = { powerPreference: 'high-performance' };

/** A name no driver gives a device. */
const NO_SUCH_NAME = '\u0001';

const LISTED = /^ \* backend: '([^']*)', name: '(.*)'$/;

/** The adapters listed in Dawn's rejection message, or undefined when the message is not such a list. */
export function parseAdapterList(message: string): ListedAdapter[] | undefined {
  const lines = message.split('\n');
  const start = lines.indexOf('Available adapters:');
  if (start < 0) return undefined;
  const adapters: ListedAdapter[] = [];
  for (const line of lines.slice(start + 1)) {
    const m = LISTED.exec(line);
    if (m) adapters.push({ backend: m[1]!, name: m[2]! });
  }
  return adapters;
}

let listed: Promise<ListedAdapter[] | string> | undefined;

/**
 * The adapters this process sees (none: an empty list), or one line saying why Dawn would not list
 * them. Asked once per thread: each asking starts a Dawn instance, with its driver's threads.
 */
export function listAdapters(dawn: Dawn): Promise<ListedAdapter[] | string> {
  listed ??= askDawn(dawn);
  return listed;
}

async function askDawn(dawn: Dawn): Promise<ListedAdapter[] | string> {
  // the object holding Dawn's instance is dropped on return, so it does not keep Node alive
  const gpu = dawn.create([`adapter=${NO_SUCH_NAME}`]);
  try {
    // resolved (null) only when Dawn found no adapter at all
    await gpu.requestAdapter(ADAPTER_OPTIONS);
    return [];
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return parseAdapterList(message) ?? `webgpu: Dawn did not list its adapters: ${message.split('\n').join(' ')}`;
  }
}
