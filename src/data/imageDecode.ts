/**
 * Image files to samples: PNG (pngjs) and JPEG (jpeg-js) decoded to RGBA bytes, then brought to the
 * model's [H, W, C] — resized bilinearly when asked, else checked — with C channels (1: grey, the
 * luma of a colour image; 3: RGB; 4: RGBA; 2: grey + alpha), scaled to [0, 1].
 */
import { PNG } from 'pngjs';
import jpeg from 'jpeg-js';

/** A decoded image: width × height × 4 bytes, RGBA. */
export interface RgbaImage {
  width: number;
  height: number;
  data: Uint8Array;
}

const PNG_MAGIC = [0x89, 0x50, 0x4e, 0x47];

/** Decodes a PNG or JPEG (told apart by their first bytes), or an error naming the file. */
export function decodeImage(bytes: Uint8Array, file: string): RgbaImage {
  const png = PNG_MAGIC.every((b, i) => bytes[i] === b);
  const jpg = bytes[0] === 0xff && bytes[1] === 0xd8;
  if (!png && !jpg)
    throw new Error(
      `${file}: not a PNG or JPEG image (its first bytes are neither); remove it from the folder or convert it`,
    );
  try {
    if (png) {
      const img = PNG.sync.read(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
      return {
        width: img.width,
        height: img.height,
        data: new Uint8Array(img.data.buffer, img.data.byteOffset, img.data.byteLength),
      };
    }
    const img = jpeg.decode(bytes, { useTArray: true, formatAsRGBA: true, maxMemoryUsageInMB: 512 });
    return { width: img.width, height: img.height, data: img.data };
  } catch (e) {
    throw new Error(
      `${file}: cannot decode this ${png ? 'PNG' : 'JPEG'} (${(e as Error).message}); the file is damaged or truncated, replace or remove it`,
    );
  }
}

/** The value of channel `c` of pixel p for a C-channel sample (bytes, 0..255). */
function channelOf(d: Uint8Array, p: number, c: number, channels: number): number {
  const r = d[4 * p]!,
    g = d[4 * p + 1]!,
    b = d[4 * p + 2]!,
    a = d[4 * p + 3]!;
  if (channels >= 3) return c === 3 ? a : d[4 * p + c]!;
  // grey: a grey image's value itself; a colour one's luma (ITU-R BT.601)
  if (c === 1) return a;
  return r === g && g === b ? r : 0.299 * r + 0.587 * g + 0.114 * b;
}

/**
 * Writes the image into `out` (H·W·C floats in [0, 1], HWC) at `offset`. Without `resize` its size
 * must be H×W; with it, bilinear sampling at pixel centres (align_corners false, as PIL and
 * PyTorch do).
 */
export function imageToSample(
  img: RgbaImage,
  shape: readonly [number, number, number],
  resize: boolean,
  file: string,
  out: Float32Array,
  offset: number,
): void {
  const [H, W, C] = shape;
  const { width, height, data } = img;
  if (!resize && (width !== W || height !== H)) {
    throw new Error(
      `${file}: the image is ${width}×${height} (width×height) but model.input needs ${W}×${H}; resize the images, or set data.resize: true to resize them when loading`,
    );
  }
  if (width === W && height === H) {
    for (let p = 0; p < H * W; p++)
      for (let c = 0; c < C; c++) out[offset + p * C + c] = channelOf(data, p, c, C) / 255;
    return;
  }
  const sy = height / H,
    sx = width / W;
  for (let y = 0; y < H; y++) {
    const fy = Math.min(Math.max((y + 0.5) * sy - 0.5, 0), height - 1);
    const y0 = Math.floor(fy),
      y1 = Math.min(y0 + 1, height - 1),
      wy = fy - y0;
    for (let x = 0; x < W; x++) {
      const fx = Math.min(Math.max((x + 0.5) * sx - 0.5, 0), width - 1);
      const x0 = Math.floor(fx),
        x1 = Math.min(x0 + 1, width - 1),
        wx = fx - x0;
      for (let c = 0; c < C; c++) {
        const v00 = channelOf(data, y0 * width + x0, c, C),
          v01 = channelOf(data, y0 * width + x1, c, C);
        const v10 = channelOf(data, y1 * width + x0, c, C),
          v11 = channelOf(data, y1 * width + x1, c, C);
        const v = (1 - wy) * ((1 - wx) * v00 + wx * v01) + wy * ((1 - wx) * v10 + wx * v11);
        out[offset + (y * W + x) * C + c] = v / 255;
      }
    }
  }
}
