/**
 * NumPy's .npy format (read here, header and all) and .npz archives of them (zip, via fflate):
 * magic `\x93NUMPY`, version, a little-endian header length, a Python dict literal
 * `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }` padded with spaces, then the values
 * in C order. Sizes are checked against the file before anything is allocated.
 */
import { unzipSync } from 'fflate';

/** A numeric array read from a .npy: the values as numbers of their dtype, and the shape. */
export interface NpyArray {
  /** NumPy's dtype string without byte order: 'f4', 'f8', 'u1', 'i8', 'b1', … */
  dtype: string;
  shape: number[];
  data: Float32Array | Float64Array | Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array;
}

const MAGIC = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59];
const KINDS: Record<
  string,
  {
    bytes: number;
    convert?: boolean;
    read: (v: DataView, o: number, le: boolean) => number;
    make: (n: number) => NpyArray['data'];
  }
> = {
  b1: { bytes: 1, read: (v, o) => v.getUint8(o), make: (n) => new Uint8Array(n) },
  u1: { bytes: 1, read: (v, o) => v.getUint8(o), make: (n) => new Uint8Array(n) },
  i1: { bytes: 1, read: (v, o) => v.getInt8(o), make: (n) => new Int8Array(n) },
  u2: { bytes: 2, read: (v, o, le) => v.getUint16(o, le), make: (n) => new Uint16Array(n) },
  i2: { bytes: 2, read: (v, o, le) => v.getInt16(o, le), make: (n) => new Int16Array(n) },
  u4: { bytes: 4, read: (v, o, le) => v.getUint32(o, le), make: (n) => new Uint32Array(n) },
  i4: { bytes: 4, read: (v, o, le) => v.getInt32(o, le), make: (n) => new Int32Array(n) },
  // 64-bit integers become doubles (exact below 2^53, which is every label and pixel)
  u8: { bytes: 8, convert: true, read: (v, o, le) => Number(v.getBigUint64(o, le)), make: (n) => new Float64Array(n) },
  i8: { bytes: 8, convert: true, read: (v, o, le) => Number(v.getBigInt64(o, le)), make: (n) => new Float64Array(n) },
  f4: { bytes: 4, read: (v, o, le) => v.getFloat32(o, le), make: (n) => new Float32Array(n) },
  f8: { bytes: 8, read: (v, o, le) => v.getFloat64(o, le), make: (n) => new Float64Array(n) },
};
const SUPPORTED = 'float32, float64, (u)int8/16/32/64 and bool';

/** Parses the bytes of one .npy file. `file` names the source in errors. */
export function parseNpy(bytes: Uint8Array, file: string): NpyArray {
  const resave = 'save it again with numpy.save';
  if (bytes.length < 10 || MAGIC.some((b, i) => bytes[i] !== b)) {
    throw new Error(
      `${file}: not a .npy file (it does not start with \\x93NUMPY${bytes.length < 10 ? `; only ${bytes.length} bytes` : ''}); ${resave}`,
    );
  }
  const major = bytes[6]!;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (major < 1 || major > 3)
    throw new Error(
      `${file}: .npy format version ${major}.${bytes[7]} is not one paratrain reads (1.0 to 3.0); ${resave}`,
    );
  const lenBytes = major === 1 ? 2 : 4;
  if (bytes.length < 8 + lenBytes)
    throw new Error(`${file}: truncated .npy file: ${bytes.length} bytes, too short for its header; ${resave}`);
  const headerLen = major === 1 ? view.getUint16(8, true) : view.getUint32(8, true);
  const dataStart = 8 + lenBytes + headerLen;
  if (bytes.length < dataStart)
    throw new Error(
      `${file}: truncated .npy file: the header needs ${dataStart} bytes, the file has ${bytes.length}; ${resave}`,
    );
  const header = new TextDecoder(major === 3 ? 'utf-8' : 'latin1').decode(bytes.subarray(8 + lenBytes, dataStart));
  const descr = /['"]descr['"]\s*:\s*['"]([^'"]*)['"]/.exec(header)?.[1];
  const fortran = /['"]fortran_order['"]\s*:\s*(True|False)/.exec(header)?.[1];
  const shapeText = /['"]shape['"]\s*:\s*\(([^)]*)\)/.exec(header)?.[1];
  if (descr === undefined || fortran === undefined || shapeText === undefined) {
    throw new Error(
      `${file}: bad .npy header ${JSON.stringify(header.trim().slice(0, 120))} (it needs descr, fortran_order and shape); ${resave}`,
    );
  }
  if (fortran === 'True')
    throw new Error(
      `${file}: the array is stored in Fortran order; save it in C order: numpy.save(path, numpy.ascontiguousarray(a))`,
    );
  const m = /^([<>|=]?)([a-z]\d+)$/.exec(descr);
  const kind = m ? KINDS[m[2]!] : undefined;
  if (!m || !kind) {
    throw new Error(
      `${file}: dtype ${JSON.stringify(descr)} is not supported (${SUPPORTED}); convert it, e.g. numpy.save(path, a.astype(numpy.float32))`,
    );
  }
  const little = m[1] !== '>';
  const shape = shapeText
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((s) => Number(s.replace(/L$/, '')));
  if (shape.some((d) => !Number.isSafeInteger(d) || d < 0))
    throw new Error(`${file}: bad shape (${shapeText}) in the .npy header; ${resave}`);
  const count = shape.reduce((a, b) => a * b, 1);
  const need = count * kind.bytes;
  const found = bytes.length - dataStart;
  if (found < need) {
    throw new Error(
      `${file}: truncated .npy file: shape (${shape.join(', ')}) of ${descr} needs ${need} bytes of data, found ${found}; the file was cut short, ${resave}`,
    );
  }
  if (found > need)
    throw new Error(
      `${file}: .npy file too long: shape (${shape.join(', ')}) of ${descr} needs ${need} bytes of data, found ${found}; ${resave}`,
    );
  const data = kind.make(count);
  if (little && !kind.convert) {
    // little-endian values stored as they are in memory: one copy of the bytes
    new Uint8Array(data.buffer).set(bytes.subarray(dataStart, dataStart + need));
  } else {
    for (let i = 0; i < count; i++) data[i] = kind.read(view, dataStart + i * kind.bytes, little);
  }
  return { dtype: m[2]!, shape, data };
}

/** The named arrays of an .npz archive (names without the .npy suffix). */
export function parseNpz(bytes: Uint8Array, file: string, wanted: readonly string[]): Map<string, NpyArray> {
  let entries: Record<string, Uint8Array>;
  try {
    entries = unzipSync(bytes, { filter: (f) => wanted.includes(f.name.replace(/\.npy$/, '')) });
  } catch (e) {
    throw new Error(
      `${file}: not a readable .npz (zip) archive (${(e as Error).message}); save it again with numpy.savez`,
    );
  }
  const out = new Map<string, NpyArray>();
  for (const [name, data] of Object.entries(entries))
    out.set(name.replace(/\.npy$/, ''), parseNpy(data, `${file}[${name}]`));
  return out;
}

/** The names of the arrays in an .npz archive (for messages). */
export function npzNames(bytes: Uint8Array): string[] {
  const names: string[] = [];
  try {
    unzipSync(bytes, {
      filter: (f) => {
        names.push(f.name.replace(/\.npy$/, ''));
        return false;
      },
    });
  } catch {
    // the caller already reported an unreadable archive
  }
  return names;
}

/** Writes a .npy file's bytes (little-endian, C order): for tests and tools. */
export function encodeNpy(
  dtype: 'f4' | 'f8' | 'u1' | 'i4' | 'i8',
  shape: readonly number[],
  values: ArrayLike<number>,
): Uint8Array {
  const kind = KINDS[dtype]!;
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${dtype === 'u1' ? '|' : '<'}${dtype}', 'fortran_order': False, 'shape': ${shapeText}, }`;
  // header padded so the data starts on a multiple of 64 bytes, ending in a newline
  header += `${' '.repeat(63 - ((10 + header.length) % 64))}\n`;
  const out = new Uint8Array(10 + header.length + values.length * kind.bytes);
  out.set(MAGIC);
  out[6] = 1;
  const view = new DataView(out.buffer);
  view.setUint16(8, header.length, true);
  for (let i = 0; i < header.length; i++) out[10 + i] = header.charCodeAt(i);
  const start = 10 + header.length;
  for (let i = 0; i < values.length; i++) {
    const o = start + i * kind.bytes,
      v = values[i]!;
    if (dtype === 'f4') view.setFloat32(o, v, true);
    else if (dtype === 'f8') view.setFloat64(o, v, true);
    else if (dtype === 'u1') view.setUint8(o, v);
    else if (dtype === 'i4') view.setInt32(o, v, true);
    else view.setBigInt64(o, BigInt(v), true);
  }
  return out;
}
