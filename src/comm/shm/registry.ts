/**
 * Registered buffers: each rank's corresponding buffer, exchanged once by `register`. A
 * registration holds every rank's view (same length, rank order), and, when every rank's buffer
 * lives in the arena, their arena addresses (then the SIMD kernel works on them in place).
 * Lookup accepts the registered array itself or any subarray of it.
 */
import type { Arena } from './arena.ts';

/** What one rank publishes about a buffer it registers. */
export interface BufferHandle {
  sab: SharedArrayBuffer | null;
  byteOffset: number;
  length: number;
  /** the buffer is a view into the world's arena (byteOffset is then its arena address) */
  arena: boolean;
  /** set when this rank could not register (the others then fail with this message too) */
  error?: string;
}

export interface Registration {
  id: number;
  /** this rank's buffer */
  own: Float32Array;
  /** every rank's buffer, by rank */
  views: Float32Array[];
  /** every rank's arena byte address, when all are in the arena; else null */
  addrs: number[] | null;
  /** false after unregister */
  active: boolean;
}

export interface Match {
  reg: Registration;
  /** element offset of the buffer within the registration */
  offset: number;
}

export class Registry {
  private readonly regs: Registration[] = [];
  constructor(private readonly arena: Arena) {}

  add(own: Float32Array, handles: BufferHandle[]): Registration {
    const views = handles.map((h) => new Float32Array(h.sab!, h.byteOffset, h.length));
    const addrs = handles.every((h) => h.arena) ? handles.map((h) => h.byteOffset) : null;
    const reg: Registration = { id: this.regs.length, own, views, addrs, active: true };
    this.regs.push(reg);
    return reg;
  }

  remove(buf: Float32Array): boolean {
    const reg = this.regs.find((r) => r.active && r.own === buf);
    if (!reg) return false;
    reg.active = false;
    reg.views = [];
    return true;
  }

  /** The registration `buf` lies in (the array itself or a subarray), or null. */
  match(buf: Float32Array): Match | null {
    const regs = this.regs;
    for (let i = 0; i < regs.length; i++) {
      const reg = regs[i]!,
        own = reg.own;
      if (!reg.active) continue;
      if (own === buf) return { reg, offset: 0 };
      if (
        own.buffer === buf.buffer &&
        buf.byteOffset >= own.byteOffset &&
        buf.byteOffset + buf.byteLength <= own.byteOffset + own.byteLength
      ) {
        return { reg, offset: (buf.byteOffset - own.byteOffset) / 4 };
      }
    }
    // a view into the arena made over a newer buffer object (after a grow): match by address
    if (this.arena.owns(buf)) {
      for (let i = 0; i < regs.length; i++) {
        const reg = regs[i]!,
          own = reg.own;
        if (!reg.active || !reg.addrs) continue;
        if (buf.byteOffset >= own.byteOffset && buf.byteOffset + buf.byteLength <= own.byteOffset + own.byteLength) {
          return { reg, offset: (buf.byteOffset - own.byteOffset) / 4 };
        }
      }
    }
    return null;
  }

  get count(): number {
    return this.regs.length;
  }
}
