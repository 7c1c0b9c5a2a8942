/**
 * Finds and loads the tcp transport's optional native data path (native/tcp/paratrain_tcp.c,
 * built by `npm run build:tcp` into build/native/paratrain_tcp.node; `npm ci` builds it wherever
 * a C compiler is present). With it, hashing and the reduce step run in place on the caller's
 * floats, and ring collectives can run on the sockets in C (the native ring, nativeRing.ts);
 * without it, the wasm data path copies them through its own memory (dataPath.ts) and the JavaScript
 * ring does the rest. Both give bit-identical results and frames, so ranks with and without it
 * interoperate.
 *
 * src/comm/tcp/ and dist/comm/tcp/ sit three levels below the repository root, so the file is
 * found relative to this module's URL. Loading never throws: a missing file, an ABI mismatch or
 * PARATRAIN_TCP_NATIVE=0 give null.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** The addon's exports. Arrays may be views at any (4-byte aligned) offset. */
export interface TcpNativeAddon {
  /** Feeds the whole 128-byte stripes of `data` into the 32 hash lanes (dataPath.ts's "ptr32"). */
  hash(lanes: Uint32Array, data: ArrayBufferView): void;
  /** dst = f32(dst + src) (then / div when div ≠ 0); the result's whole stripes into `lanes` when given. */
  addHash(dst: Float32Array, src: ArrayBufferView, div: number, lanes: Uint32Array | null): void;
  /** Runs ring steps on two socket descriptors (native/tcp/ring.h; see nativeRing.ts); an error message or undefined. */
  ring?(inFd: number, outFd: number, buf: Float32Array, slot: Uint8Array, steps: Float64Array, io: Float64Array, head: Uint8Array): string | undefined;
}

const CANDIDATES = ['../../../build/native/paratrain_tcp.node', '../../../native/tcp/build/Release/paratrain_tcp.node'];

let loaded: TcpNativeAddon | null | undefined;

/** The addon, or null when it is not built, does not load, or PARATRAIN_TCP_NATIVE=0. Loaded once per thread. */
export function loadTcpNative(): TcpNativeAddon | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  if (process.env.PARATRAIN_TCP_NATIVE === '0') return null;
  for (const rel of CANDIDATES) {
    const path = fileURLToPath(new URL(rel, import.meta.url));
    if (!existsSync(path)) continue;
    try {
      const addon = createRequire(import.meta.url)(path) as TcpNativeAddon;
      if (typeof addon.addHash === 'function' && typeof addon.hash === 'function') loaded = addon;
    } catch {
      // a stale or foreign build: the wasm data path does the work
    }
    break;
  }
  return loaded;
}
