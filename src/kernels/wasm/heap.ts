/**
 * A JS-side allocator over one wasm instance's shared linear memory.
 *
 * Bump allocation from the module's `__heap_base` (or, over a memory other threads allocate in
 * too, from regions a `HeapSource` reserves: see below), 64-byte aligned (a cache line, as oneDNN
 * aligns its own buffers: no operand of a kernel straddles lines needlessly), with exact-size free lists
 * (sizes rounded to 64 bytes) for blocks handed back through `freeBytes`/`free`. Arrays from
 * `alloc` are never reclaimed unless the caller frees them explicitly. Memory grows on demand up to
 * its maximum; because the memory is shared, growing never detaches existing views (each view keeps
 * the SharedArrayBuffer object it was made on, which stays valid for its range).
 *
 * `memory.buffer` returns a new SharedArrayBuffer object after every grow, so ownership of an array
 * is decided by a WeakSet of every buffer object this heap has handed out views on.
 */

const PAGE = 65536;
/** Every block starts on a cache line and its size is rounded to whole lines. */
const ALIGN = 64;
const roundUp = (bytes: number): number => Math.max(ALIGN, Math.ceil(bytes / ALIGN) * ALIGN);
/** Grow at least this many pages at a time (16 MiB), to keep grow calls rare. */
const MIN_GROW_PAGES = 256;

export type WasmArray = Float32Array | Int32Array;

/**
 * A memory this thread's kernels share with other threads (the shm world's arena, where every
 * device thread of a process keeps its heap, so peers reduce its flat buffers in place). The heap
 * then allocates in regions `reserve` hands out (never below `staticBytes`, the module's static
 * data) and takes buffer objects from `buffer()`, so the owner of the memory knows each of them.
 */
export interface HeapSource {
  memory: WebAssembly.Memory;
  /** bytes at the memory's start kept for the kernel module's static data */
  staticBytes: number;
  /** reserve `bytes` (a multiple of 64) for this heap alone; returns the byte address, 64-byte aligned */
  reserve(bytes: number): number;
  /** the memory's current buffer object */
  buffer(): ArrayBufferLike;
}

/** Regions reserved from a HeapSource are at least this big (16 MiB), to keep reservations rare. */
const MIN_RESERVE_BYTES = 16 << 20;

export class WasmHeap {
  readonly memory: WebAssembly.Memory;
  private top: number;
  private readonly freeLists = new Map<number, number[]>();
  /** User allocations (ptr → bytes), so `free` can check what it is given. */
  private readonly live = new Map<number, number>();
  private readonly buffers = new WeakSet<ArrayBufferLike>();
  private current: ArrayBufferLike;
  /** end of the region reserved from the source (external heaps only) */
  private limit = 0;
  private reserved = 0;

  constructor(
    memory: WebAssembly.Memory,
    heapBase: number,
    private readonly source?: HeapSource,
  ) {
    this.memory = memory;
    if (source && heapBase > source.staticBytes) {
      throw new Error(
        `wasm heap: the kernels' static data ends at byte ${heapBase}, past the ${source.staticBytes} bytes the shared memory keeps for it`,
      );
    }
    this.top = source ? 0 : roundUp(heapBase);
    this.current = source ? source.buffer() : memory.buffer;
    this.buffers.add(this.current);
  }

  /** The current buffer (re-read after growth), registered as ours. */
  buffer(): ArrayBufferLike {
    const b = this.source ? this.source.buffer() : this.memory.buffer;
    if (b !== this.current) {
      this.current = b;
      this.buffers.add(b);
    }
    return b;
  }

  /** True when `a` is a view into this heap's memory (then `a.byteOffset` is its wasm address). */
  owns(a: WasmArray): boolean {
    return this.buffers.has(a.buffer);
  }

  /** Total bytes handed out by the bump pointer so far (the heap's high-water mark; reserved bytes for a shared heap). */
  get highWater(): number {
    return this.source ? this.reserved : this.top;
  }

  /** Bump allocation in regions of the shared memory reserved for this heap. */
  private allocShared(size: number): number {
    if (this.top + size > this.limit) {
      const bytes = Math.max(size, MIN_RESERVE_BYTES);
      try {
        this.top = this.source!.reserve(bytes);
        if (this.top % ALIGN !== 0)
          throw new Error(
            `wasm heap: the shared memory reserved a region at byte ${this.top}, not ${ALIGN}-byte aligned`,
          );
      } catch (err) {
        throw new RangeError(
          `wasm heap exhausted: the memory this process's device threads share cannot hold ${bytes} more bytes (${(err as Error).message})`,
        );
      }
      this.limit = this.top + bytes;
      this.reserved += bytes;
      this.buffer();
    }
    const ptr = this.top;
    this.top += size;
    return ptr;
  }

  /** Reserve `bytes` (rounded up to 64); contents are NOT zeroed when reused from a free list. */
  allocBytes(bytes: number): number {
    const size = roundUp(bytes);
    const list = this.freeLists.get(size);
    if (list && list.length > 0) return list.pop()!;
    if (this.source) return this.allocShared(size);
    const ptr = this.top;
    const end = ptr + size;
    if (end > 2 ** 32)
      throw new RangeError(`wasm heap exhausted: cannot allocate ${size} bytes beyond the 4 GiB limit of wasm32`);
    const have = this.memory.buffer.byteLength;
    if (end > have) {
      const pages = Math.max(Math.ceil((end - have) / PAGE), MIN_GROW_PAGES);
      try {
        this.memory.grow(pages);
      } catch {
        try {
          this.memory.grow(Math.ceil((end - have) / PAGE));
        } catch (err) {
          throw new RangeError(`wasm heap exhausted: cannot grow memory to ${end} bytes (${(err as Error).message})`);
        }
      }
      this.buffer();
    }
    this.top = end;
    return ptr;
  }

  freeBytes(ptr: number, bytes: number): void {
    const size = roundUp(bytes);
    let list = this.freeLists.get(size);
    if (!list) this.freeLists.set(size, (list = []));
    list.push(ptr);
  }

  f32(ptr: number, length: number): Float32Array {
    return new Float32Array(this.buffer(), ptr, length);
  }

  i32(ptr: number, length: number): Int32Array {
    return new Int32Array(this.buffer(), ptr, length);
  }

  /** A zeroed Float32Array of `length` in wasm memory, kept until `free`. */
  allocF32(length: number): Float32Array {
    return this.allocTyped(length, false) as Float32Array;
  }

  allocI32(length: number): Int32Array {
    return this.allocTyped(length, true) as Int32Array;
  }

  private allocTyped(length: number, int: boolean): WasmArray {
    if (!Number.isInteger(length) || length < 0)
      throw new RangeError(`alloc: length must be a non-negative integer, got ${length}`);
    const bytes = length * 4;
    const ptr = this.allocBytes(bytes);
    this.live.set(ptr, roundUp(bytes));
    const a = int ? this.i32(ptr, length) : this.f32(ptr, length);
    a.fill(0);
    return a;
  }

  /** Return an array obtained from `allocF32`/`allocI32` (the whole array, not a subarray). */
  free(a: WasmArray): void {
    const size = this.live.get(a.byteOffset);
    if (!this.owns(a) || size === undefined || size !== roundUp(a.length * 4)) {
      throw new Error('free: the array was not allocated by this wasm backend (or is a subarray of one)');
    }
    this.live.delete(a.byteOffset);
    this.freeBytes(a.byteOffset, size);
  }
}
