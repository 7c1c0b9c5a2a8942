import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';

/**
 * IDX files (the MNIST / Fashion-MNIST format): two zero bytes, a type byte, a dimension count,
 * big-endian uint32 dimensions, then the values in row-major order. Only unsigned bytes (type 0x08)
 * are read: it is what the image and label files of both datasets use.
 */
export interface IdxArray {
  dims: number[];
  data: Uint8Array;
}

const UBYTE = 0x08;
const TYPE_NAMES: Record<number, string> = {
  8: 'ubyte',
  9: 'int8',
  11: 'int16',
  12: 'int32',
  13: 'float32',
  14: 'float64',
};

/** Whether `bytes` start with the gzip magic number (1f 8b). */
export function isGzip(bytes: Uint8Array): boolean {
  return bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b;
}

/** Parses IDX bytes (already decompressed). `file` only names the source in error messages. */
export function parseIdx(bytes: Uint8Array, file: string): IdxArray {
  const redownload = 'replace it with a fresh copy of the file';
  if (bytes.length < 4) {
    throw new Error(
      `${file}: truncated IDX file: ${bytes.length} bytes, too short for the 4-byte header; ${redownload}`,
    );
  }
  if (bytes[0] !== 0 || bytes[1] !== 0) {
    const head = Array.from(bytes.subarray(0, 4), (b) => b.toString(16).padStart(2, '0')).join(' ');
    throw new Error(
      `${file}: bad magic number (first bytes ${head}, expected 00 00 08 <ndim>): not an IDX file; check the path points at an IDX images or labels file`,
    );
  }
  const type = bytes[2]!;
  if (type !== UBYTE) {
    const name = TYPE_NAMES[type] ?? 'unknown';
    throw new Error(
      `${file}: IDX value type 0x${type.toString(16).padStart(2, '0')} (${name}) is not supported; paratrain reads unsigned-byte (0x08) IDX files such as MNIST's and Fashion-MNIST's`,
    );
  }
  const ndim = bytes[3]!;
  if (ndim === 0) {
    throw new Error(`${file}: bad IDX header: 0 dimensions; the file is damaged, ${redownload}`);
  }
  const headerBytes = 4 + 4 * ndim;
  if (bytes.length < headerBytes) {
    throw new Error(
      `${file}: truncated IDX file: header needs ${headerBytes} bytes for ${ndim} dimensions, found ${bytes.length}; ${redownload}`,
    );
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const dims: number[] = [];
  let expected = 1;
  for (let d = 0; d < ndim; d++) {
    const n = view.getUint32(4 + 4 * d, false);
    dims.push(n);
    expected *= n;
  }
  const found = bytes.length - headerBytes;
  if (found < expected) {
    throw new Error(
      `${file}: truncated IDX file: dims ${dims.join('×')} need ${expected} bytes of data, found ${found}; ${redownload}`,
    );
  }
  if (found > expected) {
    throw new Error(
      `${file}: IDX file too long: dims ${dims.join('×')} need ${expected} bytes of data, found ${found}; the header does not match the data, ${redownload}`,
    );
  }
  return { dims, data: bytes.subarray(headerBytes) };
}

/** Builds IDX bytes (type ubyte) from dims and data: the inverse of parseIdx. */
export function encodeIdx(dims: readonly number[], data: Uint8Array): Uint8Array {
  const size = dims.reduce((a, b) => a * b, 1);
  if (size !== data.length)
    throw new Error(`encodeIdx: dims ${dims.join('×')} need ${size} values, got ${data.length}`);
  if (dims.length < 1 || dims.length > 255)
    throw new Error(`encodeIdx: an IDX file has 1 to 255 dimensions, got ${dims.length}`);
  const headerBytes = 4 + 4 * dims.length;
  const out = new Uint8Array(headerBytes + data.length);
  const view = new DataView(out.buffer);
  out[2] = UBYTE;
  out[3] = dims.length;
  for (const [d, n] of dims.entries()) view.setUint32(4 + 4 * d, n, false);
  out.set(data, headerBytes);
  return out;
}

/** Reads an IDX file, raw or gzip-compressed (detected from its first bytes, not its name). */
export function readIdxFile(path: string): IdxArray {
  let bytes: Uint8Array = readFileSync(path);
  if (isGzip(bytes)) {
    try {
      bytes = gunzipSync(bytes);
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      throw new Error(
        `${path}: bad gzip data (${why}): the file is damaged or was only partly downloaded; replace it with a fresh copy`,
      );
    }
  }
  // a plain Uint8Array view, not a Buffer: Buffer's slice() shares memory where Uint8Array's copies
  return parseIdx(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), path);
}

/** An images file (count × rows × cols) and its labels file (count), checked against each other. */
export interface IdxImagesAndLabels {
  images: IdxArray;
  labels: IdxArray;
  count: number;
  rows: number;
  cols: number;
}

/** Reads and cross-checks an images + labels pair of IDX files. */
export function readIdxImagesAndLabels(imagesPath: string, labelsPath: string): IdxImagesAndLabels {
  const images = readIdxFile(imagesPath);
  const labels = readIdxFile(labelsPath);
  checkImagesAndLabels(images, labels, imagesPath, labelsPath);
  return { images, labels, count: images.dims[0]!, rows: images.dims[1]!, cols: images.dims[2]! };
}

/** The checks of readIdxImagesAndLabels, for arrays that did not come from files. */
export function checkImagesAndLabels(images: IdxArray, labels: IdxArray, imagesPath: string, labelsPath: string): void {
  if (images.dims.length !== 3) {
    throw new Error(
      `${imagesPath}: an images file has 3 dimensions (count × rows × columns), this one has ${images.dims.length} (${images.dims.join('×')}); check that the images and labels files are not swapped`,
    );
  }
  if (labels.dims.length !== 1) {
    throw new Error(
      `${labelsPath}: a labels file has 1 dimension (count), this one has ${labels.dims.length} (${labels.dims.join('×')}); check that the images and labels files are not swapped`,
    );
  }
  if (images.dims[1] === 0 || images.dims[2] === 0) {
    throw new Error(
      `${imagesPath}: images of ${images.dims[1]}×${images.dims[2]} pixels hold nothing; the header is damaged, replace it with a fresh copy of the file`,
    );
  }
  if (images.dims[0] !== labels.dims[0]) {
    throw new Error(
      `${imagesPath} has ${images.dims[0]} images but ${labelsPath} has ${labels.dims[0]} labels: the counts must match; use the images and labels files of the same split (train-… with train-…, t10k-… with t10k-…)`,
    );
  }
}
