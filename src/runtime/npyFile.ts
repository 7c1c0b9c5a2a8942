/**
 * Reading a NumPy `.npy` array (format versions 1–3, C order) into float32 values, for predict.
 * Every malformed file ends in one error naming the file and what is wrong; sizes are checked
 * against the file before anything is allocated.
 */

export interface NpyArray {
  shape: number[];
  /** the dtype as NumPy writes it: '<f4', '|u1', … */
  dtype: string;
  values: Float32Array;
}

const MAGIC = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // \x93NUMPY

type Reader = (view: DataView, offset: number, little: boolean) => number;
const READERS: Record<string, [bytes: number, read: Reader]> = {
  f4: [4, (v, o, le) => v.getFloat32(o, le)],
  f8: [8, (v, o, le) => v.getFloat64(o, le)],
  u1: [1, (v, o) => v.getUint8(o)],
  i1: [1, (v, o) => v.getInt8(o)],
  u2: [2, (v, o, le) => v.getUint16(o, le)],
  i2: [2, (v, o, le) => v.getInt16(o, le)],
  u4: [4, (v, o, le) => v.getUint32(o, le)],
  i4: [4, (v, o, le) => v.getInt32(o, le)],
  u8: [8, (v, o, le) => Number(v.getBigUint64(o, le))],
  i8: [8, (v, o, le) => Number(v.getBigInt64(o, le))],
  b1: [1, (v, o) => v.getUint8(o)],
};

/** Parses the bytes of a `.npy` file named `file` (for messages). */
export function parseNpy(bytes: Uint8Array, file: string): NpyArray {
  const fail = (what: string) => new Error(`${file}: ${what}`);
  if (bytes.length < 10 || !MAGIC.every((b, i) => bytes[i] === b)) throw fail('not a NumPy .npy file (it does not start with \\x93NUMPY)');
  const major = bytes[6]!;
  if (major < 1 || major > 3) throw fail(`NumPy format version ${major}.${bytes[7]} is not supported (1, 2 or 3 are)`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const lenBytes = major === 1 ? 2 : 4;
  const headerLength = major === 1 ? view.getUint16(8, true) : bytes.length >= 12 ? view.getUint32(8, true) : Infinity;
  const start = 8 + lenBytes;
  if (start + headerLength > bytes.length) throw fail('the header is cut short');
  const header = new TextDecoder(major === 3 ? 'utf-8' : 'latin1').decode(bytes.subarray(start, start + headerLength));
  const descr = /'descr'\s*:\s*'([^']*)'/.exec(header)?.[1];
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header)?.[1];
  const shapeText = /'shape'\s*:\s*\(([^)]*)\)/.exec(header)?.[1];
  if (descr === undefined || fortran === undefined || shapeText === undefined) throw fail(`the header is not a NumPy array description: ${header.trim().slice(0, 120)}`);
  if (fortran === 'True') throw fail('the array is in Fortran order; save it in C order (np.save(path, np.ascontiguousarray(a)))');
  const shape = shapeText.split(',').map((s) => s.trim()).filter((s) => s !== '').map(Number);
  if (shape.some((d) => !Number.isSafeInteger(d) || d < 0)) throw fail(`the shape (${shapeText}) is not a list of whole numbers`);
  const m = /^([<>|=])([a-z]\d+)$/.exec(descr);
  const kind = m && READERS[m[2]!];
  if (!m || !kind) {
    throw fail(`dtype '${descr}' is not supported; save float32, float64, (u)int8/16/32/64 or bool (e.g. a.astype(np.float32))`);
  }
  const [size, read] = kind;
  const count = shape.reduce((a, b) => a * b, 1);
  const offset = start + headerLength;
  if (offset + count * size > bytes.length) {
    throw fail(`the shape (${shape.join(', ')}) of ${descr} needs ${count * size} bytes of data but the file holds ${bytes.length - offset}; it is cut short`);
  }
  // '>' is big-endian; '<', '|' (one byte) and '=' (native: little on every machine Node runs on) are little
  const little = m[1] !== '>';
  const values = new Float32Array(count);
  for (let i = 0; i < count; i++) values[i] = read(view, offset + i * size, little);
  return { shape, dtype: descr, values };
}
