/**
 * Interleaved PCM bytes (a WAV data chunk as wavefile leaves it) to mono float samples in one pass:
 * each sample read with a DataView, offset and scaled to [−1, 1), the channels averaged. This is the
 * path for the common layouts — integer PCM of 8 (unsigned), 16, 24 or 32 bits and IEEE float of 32
 * or 64 bits, little- or big-endian — where wavefile's general unpacker costs ~50 times more.
 */

/** Sample layouts `monoFromPcm` reads, by wavefile's bit-depth code ('32f': float32, '64': float64). */
export const DIRECT_PCM_DEPTHS: ReadonlySet<string> = new Set(['8', '16', '24', '32', '32f', '64']);

const HOST_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Bytes per sample of a DIRECT_PCM_DEPTHS code. */
export function pcmBytes(depth: string): number {
  return depth === '32f' ? 4 : depth === '64' ? 8 : Number(depth) / 8;
}

/**
 * The mean of the channels of `bytes` (whole frames only; a trailing partial frame is ignored), each
 * sample mapped to (value − offset) · scale. Sums of channels are formed in float64 before the one
 * rounding to float32.
 */
export function monoFromPcm(
  bytes: Uint8Array,
  channels: number,
  depth: string,
  bigEndian: boolean,
  offset: number,
  scale: number,
): Float32Array {
  if (!DIRECT_PCM_DEPTHS.has(depth)) throw new Error(`monoFromPcm: unsupported sample layout ${depth}`);
  const size = pcmBytes(depth);
  const n = Math.floor(bytes.byteLength / (size * channels));
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const little = !bigEndian;
  const read: (at: number) => number =
    depth === '8'
      ? (at) => view.getUint8(at)
      : depth === '16'
        ? (at) => view.getInt16(at, little)
        : depth === '24'
          ? (at) =>
              little
                ? view.getUint8(at) | (view.getUint8(at + 1) << 8) | (view.getInt8(at + 2) << 16)
                : (view.getInt8(at) << 16) | (view.getUint8(at + 1) << 8) | view.getUint8(at + 2)
          : depth === '32'
            ? (at) => view.getInt32(at, little)
            : depth === '32f'
              ? (at) => view.getFloat32(at, little)
              : (at) => view.getFloat64(at, little);
  const mono = new Float32Array(n);
  const k = scale / channels;
  if (channels === 1) {
    if (depth === '16' && little) {
      // the common case, without the indirect call; an Int16Array view where byte order and alignment allow
      if (HOST_LITTLE_ENDIAN && bytes.byteOffset % 2 === 0) {
        const ints = new Int16Array(bytes.buffer, bytes.byteOffset, n);
        for (let i = 0; i < n; i++) mono[i] = (ints[i]! - offset) * k;
      } else {
        for (let i = 0; i < n; i++) mono[i] = (view.getInt16(2 * i, true) - offset) * k;
      }
    } else {
      for (let i = 0; i < n; i++) mono[i] = (read(i * size) - offset) * k;
    }
    return mono;
  }
  const stride = size * channels;
  for (let i = 0; i < n; i++) {
    let sum = 0;
    for (let c = 0; c < channels; c++) sum += read(i * stride + c * size) - offset;
    mono[i] = sum * k;
  }
  return mono;
}
