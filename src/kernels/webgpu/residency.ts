/**
 * Host arrays that name GPU buffers. The webgpu backend's `alloc` makes a host Float32Array and a
 * buffer of the same size, remembered by the host array's ArrayBuffer, so a view (a layer's slice
 * of the flat parameters) maps to the same view of the buffer. Kernels compute on the buffers; the
 * host copies follow only at the DeviceStorage points (kernels/deviceStorage.ts).
 *
 * An array the backend did not make (a batch the data loader filled) is an input: it is copied to
 * the GPU each time a kernel reads it. A kernel never writes one: the host could not see the result.
 */
import type { DeviceStorage } from '../deviceStorage.ts';
import type { DeviceStepKernels } from '../deviceStepKernels.ts';
import type { GpuArray } from './gpuArray.ts';
import { gpuView } from './gpuArray.ts';
import type { GpuContext } from './gpuContext.ts';
import { uploadInts } from './hostInts.ts';

export class Residency implements DeviceStorage {
  private readonly buffers = new WeakMap<ArrayBufferLike, GpuArray>();
  /** int32 arrays a kernel wrote (max pooling's argmax): they live on the device from then on */
  private readonly intBuffers = new WeakMap<ArrayBufferLike, GpuArray>();

  readonly stepKernels: DeviceStepKernels;

  constructor(
    private readonly ctx: GpuContext,
    stepKernels: (r: Residency) => DeviceStepKernels,
  ) {
    this.stepKernels = stepKernels(this);
  }

  alloc(length: number, shared = false): Float32Array {
    const host = shared ? new Float32Array(new SharedArrayBuffer(length * 4)) : new Float32Array(length);
    this.buffers.set(host.buffer, this.ctx.array(length));
    return host;
  }

  /** Whether `a` views an array this residency made. */
  owns(a: Float32Array): boolean {
    return this.buffers.has(a.buffer);
  }

  /** The device view of `a` for a kernel to read: its own buffer's view, or a fresh copy of a host array. */
  input(a: Float32Array): GpuArray {
    return this.view(a) ?? this.ctx.upload(a);
  }

  /** The device view of `a` for a kernel to write; `kernel` names the call in the error for a host-only array. */
  output(a: Float32Array, kernel: string): GpuArray {
    const v = this.view(a);
    if (!v)
      throw new Error(
        `webgpu: ${kernel} writes into an array the backend did not allocate; a layer must take its outputs from backend.alloc`,
      );
    return v;
  }

  /**
   * The device view of an int32 array: one a kernel wrote before (or writes now: `write`) stays on
   * the device, as only kernels read it; any other (labels, lengths, row starts) is copied from the host.
   */
  ints(a: Int32Array, write = false): GpuArray {
    let whole = this.intBuffers.get(a.buffer);
    if (!whole && write) {
      whole = this.ctx.array(a.buffer.byteLength / 4);
      this.intBuffers.set(a.buffer, whole);
    }
    return whole ? gpuView(whole, a.byteOffset / 4, a.length) : uploadInts(this.ctx, a);
  }

  async toHost(arrays: readonly Float32Array[]): Promise<void> {
    const owned = arrays.filter((a) => this.owns(a) && a.length > 0);
    if (owned.length === 0) return;
    const data = await this.ctx.read(...owned.map((a) => this.view(a)!));
    for (const [i, a] of owned.entries()) a.set(data[i]!);
  }

  fromHost(arrays: readonly Float32Array[]): void {
    for (const a of arrays) {
      const v = this.view(a);
      if (v && a.length > 0) this.ctx.upload(a, v);
    }
  }

  flush(): void {
    this.ctx.flush();
  }

  private view(a: Float32Array): GpuArray | undefined {
    const whole = this.buffers.get(a.buffer);
    return whole ? gpuView(whole, a.byteOffset / 4, a.length) : undefined;
  }
}
