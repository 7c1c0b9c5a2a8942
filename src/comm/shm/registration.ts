/** What one rank publishes when it registers a buffer, and the checks every rank makes on all ranks' handles. */
import type { Arena } from './arena.ts';
import { describeValue } from './callChecks.ts';
import { ShmUsageError } from './errors.ts';
import type { BufferHandle } from './registry.ts';

/** This rank's handle for `buf`: its shared memory and place, or the reason peers cannot read it. */
export function registrationHandle(rank: number, buf: Float32Array, arena: Arena): BufferHandle {
  if (!(buf instanceof Float32Array)) {
    return {
      sab: null,
      byteOffset: 0,
      length: 0,
      arena: false,
      error: `rank ${rank} passed ${describeValue(buf)} to register(), not a Float32Array`,
    };
  }
  if (!(buf.buffer instanceof SharedArrayBuffer)) {
    return {
      sab: null,
      byteOffset: 0,
      length: buf.length,
      arena: false,
      error:
        `rank ${rank}'s buffer (${buf.length} floats) is backed by an ArrayBuffer, not a SharedArrayBuffer, so peers cannot read it; ` +
        'allocate it with comm.alloc(n), new Float32Array(new SharedArrayBuffer(n * 4)), or in a shared wasm memory',
    };
  }
  return { sab: buf.buffer, byteOffset: buf.byteOffset, length: buf.length, arena: arena.owns(buf) };
}

/** Throws ShmUsageError when any rank could not register, or the ranks' buffers differ in length. */
export function checkRegistrations(handles: readonly BufferHandle[]): void {
  const errors = handles.filter((h) => h.error).map((h) => h.error);
  if (errors.length) throw new ShmUsageError(`register: ${errors.join('; ')}`);
  const lengths = handles.map((h) => h.length);
  if (lengths.some((l) => l !== lengths[0])) {
    throw new ShmUsageError(
      `register: ranks registered buffers of different lengths (${lengths.map((l, r) => `rank ${r}: ${l}`).join(', ')}); register corresponding buffers in the same order on every rank`,
    );
  }
}
