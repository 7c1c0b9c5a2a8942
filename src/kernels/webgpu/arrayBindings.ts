/**
 * The bindings of a kernel's arrays, each GPU buffer bound once: WebGPU refuses one buffer in two
 * bindings of a dispatch when either is writable, yet a kernel's arrays may be views of one buffer
 * (a model's parameters and their gradients live in flat allocations). The shader reaches array
 * `x` only through `ld_x(i)` / `st_x(i, v)`, which add its element offset from `Params` and read
 * whichever binding holds its buffer, so one shader body serves every aliasing.
 */
import type { GpuArray } from './gpuArray.ts';
import { Params } from './params.ts';

export interface ArrayUse {
  /** the WGSL name: accessors `ld_<name>(i)` and, when written, `st_<name>(i, v)` */
  name: string;
  array: GpuArray;
  write?: boolean;
  /** holds i32 (an argmax, sequence lengths) rather than f32 */
  int?: boolean;
}

export interface BoundArrays {
  /** the Params struct (the offsets, then `fields`), the bindings and the accessors */
  header: string;
  /** one per distinct buffer, in binding order */
  arrays: GpuArray[];
  /** the offsets written; the caller appends `fields` in order */
  params: Params;
  /** which binding each array uses: shaders are cached by kernel name and this key */
  key: string;
}

/** Binds `uses` with a Params struct of their offsets followed by `fields` ("H: u32, eps: f32"). */
export function bindArrays(uses: ArrayUse[], fields: string): BoundArrays {
  const buffers: GPUBuffer[] = [];
  const slot = uses.map((u) => {
    const at = buffers.indexOf(u.array.buffer);
    if (at >= 0) return at;
    buffers.push(u.array.buffer);
    return buffers.length - 1;
  });
  const first = buffers.map((_, b) => uses[slot.indexOf(b)]!);
  const params = new Params();
  for (const u of uses) params.u32(u.array.offset);
  const offsets = uses.map((u) => `${u.name}Off: u32`).join(', ');
  let header = `struct Params { ${offsets}${fields ? `, ${fields}` : ''} }\n`;
  header += '@group(0) @binding(0) var<uniform> p: Params;\n';
  // a buffer holding ints is i32 and its floats pass through bitcast, so that an int never sits in
  // a float register, where a NaN-patterned one (−1) might be canonicalised
  const types = buffers.map((_, b) => (uses.some((u, i) => slot[i] === b && u.int) ? 'i32' : 'f32'));
  buffers.forEach((_, b) => {
    const written = uses.some((u, i) => slot[i] === b && u.write);
    header += `@group(0) @binding(${b + 1}) var<storage, ${written ? 'read_write' : 'read'}> buf${b}: array<${types[b]}>;\n`;
  });
  uses.forEach((u, i) => {
    const b = slot[i]!;
    const type = u.int ? 'i32' : 'f32';
    const element = `buf${b}[p.${u.name}Off + i]`;
    const same = type === types[b];
    header += `fn ld_${u.name}(i: u32) -> ${type} { return ${same ? element : `bitcast<${type}>(${element})`}; }\n`;
    if (u.write)
      header += `fn st_${u.name}(i: u32, v: ${type}) { ${element} = ${same ? 'v' : `bitcast<${types[b]}>(v)`}; }\n`;
  });
  return { header, arrays: first.map((u) => u.array), params, key: slot.join(',') };
}

const shaders = new Map<string, string>();

/** The shader text made once per kernel name and aliasing, so that its pipeline is found by identity. */
export function cachedShader(name: string, bound: BoundArrays, body: () => string): string {
  const key = `${name}|${bound.key}`;
  let shader = shaders.get(key);
  if (!shader) shaders.set(key, (shader = bound.header + body()));
  return shader;
}

/** Threads per workgroup of the one-dimensional kernels. */
export const LINEAR_WORKGROUP = 64;

/**
 * Workgroups for `count` threads of a one-dimensional kernel: over x, and y past 65535 groups (the
 * per-dimension limit); the shader rebuilds the index with `linearIndex`.
 */
export function linearGroups(count: number): [number, number] {
  const groups = Math.ceil(count / LINEAR_WORKGROUP);
  return [Math.max(1, Math.min(groups, 65535)), Math.max(1, Math.ceil(groups / 65535))];
}

/** WGSL: the entry point of a one-dimensional kernel, `i` its thread's index (the body returns past `count`). */
export function linearMain(count: string, body: string): string {
  return `
@compute @workgroup_size(${LINEAR_WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let i = gid.y * groups.x * ${LINEAR_WORKGROUP}u + gid.x;
  if (i >= ${count}) { return; }
${body}
}`;
}
