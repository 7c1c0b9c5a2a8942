/**
 * One device's GPU: its `GPUDevice`, compiled pipelines (once per shader and workgroup size),
 * buffers, and the command stream. Kernels are recorded into one command encoder and submitted
 * together (`flush`), so a whole step is one submit; the host waits only when it reads (`read`).
 */
import type { OpenAdapter, AdapterDescription } from './gpuAdapter.ts';
import { openAdapter } from './gpuAdapter.ts';
import type { GpuArray } from './gpuArray.ts';
import type { Params } from './params.ts';

/** Uniform slices are bound at this alignment (WebGPU's minUniformBufferOffsetAlignment ≤ 256). */
const UNIFORM_SLICE = 256;
const UNIFORM_SLICES = 1024;

/** Bytes of a buffer for `floats` floats: whole 16-byte units, none empty. */
const bufferBytes = (floats: number) => Math.max(16, Math.ceil((floats * 4) / 16) * 16);

export interface Dispatch {
  /** WGSL source: binding 0 of group 0 is the uniform `Params`, 1… the storage arrays in order */
  shader: string;
  arrays: GpuArray[];
  params: Params;
  /** workgroups in x, y, z */
  groups: [number, number?, number?];
}

export class GpuContext {
  private readonly pipelines = new Map<string, GPUComputePipeline>();
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private uniforms: GPUBuffer[] = [];
  private readonly uniformData = new Uint8Array(UNIFORM_SLICE * UNIFORM_SLICES);
  private used = 0;
  private lost: string | undefined;
  private failed: string | undefined;
  readonly usage: GPUBufferUsage;

  private constructor(
    // Dawn's root object: held while the device lives, dropped by destroy so that Node can exit
    // biome-ignore lint/correctness/noUnusedPrivateClassMembers: held for its lifetime, never read
    private opened: OpenAdapter | null,
    readonly device: GPUDevice,
    readonly description: AdapterDescription,
  ) {
    this.usage = opened!.dawn.globals.GPUBufferUsage;
    device.lost.then((info) => {
      this.lost = `the GPU device was lost (${info.reason}): ${info.message}`;
    });
    // a kernel the device refused (a validation error) fails the next read instead of passing unseen
    device.onuncapturederror = (e) => {
      this.failed ??= `webgpu: ${e.error.message.split('\n')[0]}`;
    };
  }

  /**
   * Opens an adapter and a device on it: the one `setting` chooses (PARATRAIN_WEBGPU_ADAPTER's
   * forms: a part of a driver's name, `#index`, or unset for the GPU of the device's `slot` on its
   * host, by default the slot this thread set: deviceSlot.ts). Gives one line when no adapter opens;
   * throws a BackendSettingError naming the fix when the setting cannot be met.
   */
  static async open(setting?: string, slot?: number): Promise<GpuContext | string> {
    const opened = await openAdapter(setting, slot);
    if (typeof opened === 'string') return opened;
    const a = opened.adapter.limits;
    const device = await opened.adapter.requestDevice({
      requiredLimits: {
        maxStorageBufferBindingSize: a.maxStorageBufferBindingSize,
        maxBufferSize: a.maxBufferSize,
        maxStorageBuffersPerShaderStage: a.maxStorageBuffersPerShaderStage,
        maxComputeWorkgroupStorageSize: a.maxComputeWorkgroupStorageSize,
        maxComputeInvocationsPerWorkgroup: a.maxComputeInvocationsPerWorkgroup,
      },
    });
    return new GpuContext(opened, device, opened.description);
  }

  /** A zeroed storage array of `length` floats, in a buffer of its own. */
  array(length: number): GpuArray {
    const u = this.usage;
    const buffer = this.device.createBuffer({
      size: bufferBytes(length),
      usage: u.STORAGE | u.COPY_SRC | u.COPY_DST,
    });
    return { buffer, offset: 0, length };
  }

  /** An array holding a copy of `data`. */
  upload(data: Float32Array, into: GpuArray = this.array(data.length)): GpuArray {
    if (into.length !== data.length) throw new RangeError(`upload of ${data.length} floats into ${into.length}`);
    // through the command stream, so that it lands after the kernels recorded before it
    const staging = this.device.createBuffer({
      size: bufferBytes(data.length),
      usage: this.usage.COPY_SRC,
      mappedAtCreation: true,
    });
    new Float32Array(staging.getMappedRange(), 0, data.length).set(data);
    staging.unmap();
    this.endPass();
    this.commands().copyBufferToBuffer(staging, 0, into.buffer, into.offset * 4, data.length * 4);
    this.afterSubmit.push(() => staging.destroy());
    return into;
  }

  /** Reads so far (each one submit and one wait): a training step's are counted by its tests. */
  reads = 0;

  /** Records one kernel; nothing runs until `flush` or `read`. */
  dispatch(d: Dispatch): void {
    if (this.lost) throw new Error(this.lost);
    const pipeline = this.pipeline(d.shader);
    if (this.used === UNIFORM_SLICES) this.flush();
    const slice = this.used++;
    this.uniformData.set(new Uint8Array(d.params.bytes, 0, d.params.size), slice * UNIFORM_SLICE);
    const entries: GPUBindGroupEntry[] = [
      { binding: 0, resource: { buffer: this.uniformBuffer(), offset: slice * UNIFORM_SLICE, size: UNIFORM_SLICE } },
      ...d.arrays.map((a, i) => ({ binding: i + 1, resource: { buffer: a.buffer } })),
    ];
    const group = this.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries });
    const pass = this.computePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(d.groups[0], d.groups[1] ?? 1, d.groups[2] ?? 1);
  }

  /** Submits what was recorded. */
  flush(): void {
    if (!this.encoder) return;
    this.endPass();
    if (this.used > 0)
      this.device.queue.writeBuffer(this.uniformBuffer(), 0, this.uniformData, 0, this.used * UNIFORM_SLICE);
    this.device.queue.submit([this.encoder.finish()]);
    this.encoder = null;
    this.used = 0;
    // a fresh uniform buffer per submit: the previous one is still read by the work just queued
    for (const u of this.uniforms.splice(0)) this.afterSubmit.push(() => u.destroy());
    const done = this.afterSubmit.splice(0);
    if (done.length > 0)
      this.device.queue.onSubmittedWorkDone().then(() => {
        for (const f of done) f();
      });
  }

  /** The arrays' contents on the host, after everything recorded before: one submit, one wait. */
  async read(...arrays: GpuArray[]): Promise<Float32Array[]> {
    this.reads++;
    const total = arrays.reduce((n, a) => n + a.length, 0);
    const staging = this.device.createBuffer({
      size: bufferBytes(total),
      usage: this.usage.MAP_READ | this.usage.COPY_DST,
    });
    this.endPass();
    const enc = this.commands();
    let at = 0;
    for (const a of arrays) {
      if (a.length > 0) enc.copyBufferToBuffer(a.buffer, a.offset * 4, staging, at * 4, a.length * 4);
      at += a.length;
    }
    this.flush();
    await staging.mapAsync(1 /* GPUMapMode.READ */);
    if (this.lost) throw new Error(this.lost);
    if (this.failed) throw new Error(this.failed);
    const all = new Float32Array(staging.getMappedRange().slice(0));
    staging.unmap();
    staging.destroy();
    at = 0;
    return arrays.map((a) => all.subarray(at, (at += a.length)));
  }

  /** Releases the device and drops the bindings' root object, so that Node can exit. */
  destroy(): void {
    this.flush();
    this.device.destroy();
    this.opened = null;
  }

  private readonly afterSubmit: (() => void)[] = [];

  private pipeline(shader: string): GPUComputePipeline {
    let p = this.pipelines.get(shader);
    if (!p) {
      const module = this.device.createShaderModule({ code: shader });
      p = this.device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
      this.pipelines.set(shader, p);
    }
    return p;
  }

  private uniformBuffer(): GPUBuffer {
    if (this.uniforms.length === 0)
      this.uniforms.push(
        this.device.createBuffer({
          size: this.uniformData.byteLength,
          usage: this.usage.UNIFORM | this.usage.COPY_DST,
        }),
      );
    return this.uniforms[0]!;
  }

  private commands(): GPUCommandEncoder {
    this.encoder ??= this.device.createCommandEncoder();
    return this.encoder;
  }

  private computePass(): GPUComputePassEncoder {
    this.pass ??= this.commands().beginComputePass();
    return this.pass;
  }

  private endPass(): void {
    this.pass?.end();
    this.pass = null;
  }
}
