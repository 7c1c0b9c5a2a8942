/**
 * The world's arena: one shared WebAssembly.Memory that every rank (and the main thread) maps.
 * Its start holds fixed regions (per-rank kernel scratch, mailbox payloads, staging areas; see
 * layout.ts); above them a bump allocator hands out 64-byte aligned Float32Arrays
 * (`comm.alloc`, `world.alloc`), growing the memory on demand. Buffers registered from the arena
 * are reduced by the SIMD kernel in place, with no copies.
 */
import type { Layout } from './layout.ts';
import { ALIGN, alignUp } from './layout.ts';
import { Mutex } from './mutex.ts';
import type { WaitOptions } from './wait.ts';
import { ShmUsageError } from './errors.ts';

const PAGE = 65536;
/** grow at least this many pages at a time (16 MiB) */
const MIN_GROW_PAGES = 256;

export class Arena {
  /** every SharedArrayBuffer object this thread has seen for the memory (one per grow) */
  private readonly buffers = new WeakSet<ArrayBufferLike>();
  private readonly lock: Mutex;

  constructor(
    readonly memory: WebAssembly.Memory,
    private readonly control: Int32Array,
    private readonly layout: Layout,
    private readonly maxBytes: number,
    waitOpts: WaitOptions,
  ) {
    this.lock = new Mutex(control, layout.allocLock, waitOpts);
    this.current();
  }

  /** The memory's current SharedArrayBuffer (remembered as ours). */
  current(): SharedArrayBuffer {
    const b = this.memory.buffer as unknown as SharedArrayBuffer;
    this.buffers.add(b);
    return b;
  }

  /** True when `buf` is a view into the arena (then its byteOffset is its arena address). */
  owns(buf: ArrayBufferView): boolean {
    return this.buffers.has(buf.buffer) || buf.buffer === this.current();
  }

  /** A Float32Array view of `length` floats at arena byte `addr`. */
  f32(addr: number, length: number): Float32Array {
    let b = this.memory.buffer as unknown as SharedArrayBuffer;
    if (addr + length * 4 > b.byteLength) b = this.current();
    return new Float32Array(b, addr, length);
  }

  /** Allocates `length` zeroed floats (never freed; the arena lives as long as the world). */
  alloc(length: number): Float32Array {
    if (!Number.isInteger(length) || length < 0)
      throw new ShmUsageError(`alloc: length must be a non-negative integer, got ${length}`);
    return this.lock.withLock(() => {
      const top = Math.max(Atomics.load(this.control, this.layout.heapTop) * ALIGN, this.layout.heapBase);
      const start = alignUp(top);
      const end = start + alignUp(Math.max(length * 4, ALIGN));
      if (end > this.maxBytes) {
        throw new ShmUsageError(
          `alloc: the shared arena cannot hold ${length} more floats (${end} bytes needed, arenaMaxBytes is ${this.maxBytes}); raise arenaMaxBytes in createShmWorld options`,
        );
      }
      const have = this.memory.buffer.byteLength;
      if (end > have) {
        const need = Math.ceil((end - have) / PAGE);
        const maxPages = Math.floor(this.maxBytes / PAGE);
        const pages = Math.min(Math.max(need, MIN_GROW_PAGES), maxPages - have / PAGE);
        try {
          this.memory.grow(pages);
        } catch (err) {
          throw new ShmUsageError(`alloc: could not grow the shared arena to ${end} bytes (${(err as Error).message})`);
        }
      }
      Atomics.store(this.control, this.layout.heapTop, end / ALIGN);
      return new Float32Array(this.current(), start, length);
    });
  }
}
