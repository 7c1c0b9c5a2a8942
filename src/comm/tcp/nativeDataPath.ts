/**
 * Finds and loads the tcp transport's optional native data path (native/tcp/paratrain_tcp.c,
 * built by `npm run build:tcp` into build/native/paratrain_tcp.node; `npm ci` builds it wherever
 * a C compiler is present). With it, hashing and the reduce step run in place on the caller's
 * floats, and ring collectives can run on the sockets in C (the native ring, nativeRing.ts);
 * without it, the wasm data path copies them through its own memory (dataPath.ts) and the JavaScript
 * ring does the rest. Both give bit-identical results and frames, so ranks with and without it
 * interoperate.
 *
 * Found and loaded by the platform loader (src/platform/addon.ts). Loading never throws: a
 * missing file, an ABI mismatch or PARATRAIN_TCP_NATIVE=0 give null.
 */
import { addonUnavailableReason, loadAddon, type AddonSpec } from '../../platform/addon.ts';

/** The addon's exports. Arrays may be views at any (4-byte aligned) offset. */
export interface TcpNativeAddon {
  /** Feeds the whole 128-byte stripes of `data` into the 32 hash lanes (dataPath.ts's "ptr32"). */
  hash(lanes: Uint32Array, data: ArrayBufferView): void;
  /** dst = f32(dst + src) (then / div when div ≠ 0); the result's whole stripes into `lanes` when given. */
  addHash(dst: Float32Array, src: ArrayBufferView, div: number, lanes: Uint32Array | null): void;
  /**
   * Runs ring steps on two socket descriptors (native/tcp/ring.h; see nativeRing.ts); an error message or undefined.
   * `watch`: other sockets that hand the ring back once readable (an addon built before it ignores them).
   */
  ring?(
    inFd: number,
    outFd: number,
    buf: Float32Array,
    slot: Uint8Array,
    steps: Float64Array,
    io: Float64Array,
    head: Uint8Array,
    watch?: Int32Array,
  ): string | undefined;
}

const SPEC: AddonSpec = {
  file: 'paratrain_tcp.node',
  sourceDir: 'native/tcp',
  disableEnv: 'PARATRAIN_TCP_NATIVE',
  requiredExports: ['addHash', 'hash'],
  buildCommand: 'npm run build:tcp',
  notBuiltReason: 'the native tcp data path is not built (npm run build:tcp)',
};

/** The addon, or null when it is not built, does not load, or PARATRAIN_TCP_NATIVE=0 (the wasm data path does the work). Loaded once per thread. */
export function loadTcpNative(): TcpNativeAddon | null {
  return loadAddon<TcpNativeAddon>(SPEC);
}

/** Why `loadTcpNative()` returned null (undefined when it loaded or was not tried). */
export function tcpNativeUnavailableReason(): string | undefined {
  return addonUnavailableReason(SPEC);
}
