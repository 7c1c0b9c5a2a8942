/**
 * Decoding one PNG or JPEG file into a sample of the model's input shape [H, W, C] (NHWC, values
 * scaled to [0, 1] as the training images are): pngjs and jpeg-js decode to RGBA; C = 1 takes the
 * grey value (a colour image's luma, ITU-R BT.601), C = 2 grey and alpha, C = 3 RGB, C = 4 RGBA —
 * as the image-folder dataset does (src/data/imageDecode.ts). A size mismatch names the file and the
 * shape the model takes.
 */
import pngjs from 'pngjs';
import jpeg from 'jpeg-js';
import { formatShape } from '../tensor/shape.ts';

const JPEG_LIMIT_MP = 64;

/** RGBA pixels of a PNG or JPEG file's bytes. */
function decodeRgba(bytes: Uint8Array, file: string): { width: number; height: number; data: Uint8Array } {
  const isPng = bytes[0] === 0x89 && bytes[1] === 0x50 && bytes[2] === 0x4e && bytes[3] === 0x47;
  const isJpeg = bytes[0] === 0xff && bytes[1] === 0xd8;
  try {
    if (isPng) {
      const png = pngjs.PNG.sync.read(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
      return { width: png.width, height: png.height, data: png.data };
    }
    if (isJpeg) {
      const img = jpeg.decode(bytes, { useTArray: true, formatAsRGBA: true, maxResolutionInMP: JPEG_LIMIT_MP });
      return { width: img.width, height: img.height, data: img.data };
    }
  } catch (e) {
    throw new Error(`${file}: cannot decode the image (${(e as Error).message})`);
  }
  throw new Error(`${file}: not a PNG or JPEG image (its first bytes are neither)`);
}

/** The image in `bytes` as H × W × C floats in [0, 1], checked against `inputShape` ([H, W, C]). */
export function decodeImageSample(bytes: Uint8Array, file: string, inputShape: readonly number[]): Float32Array {
  if (inputShape.length !== 3) {
    throw new Error(`${file}: an image, but the model takes ${formatShape(inputShape)} (features, not [height, width, channels]); give CSV rows or a .npy file`);
  }
  const [H, W, C] = inputShape as [number, number, number];
  if (C < 1 || C > 4) throw new Error(`${file}: the model takes ${C} channels per pixel (model.input ${formatShape(inputShape)}); images give 1 (grey), 2 (grey, alpha), 3 (RGB) or 4 (RGBA)`);
  const { width, height, data } = decodeRgba(bytes, file);
  if (width !== W || height !== H) {
    throw new Error(`${file}: the image is ${width}×${height} pixels (width×height); the model takes ${W}×${H} (model.input ${formatShape(inputShape)} is height, width, channels); resize it`);
  }
  const out = new Float32Array(H * W * C);
  for (let p = 0; p < H * W; p++) {
    const r = data[p * 4]!, g = data[p * 4 + 1]!, b = data[p * 4 + 2]!, a = data[p * 4 + 3]!;
    if (C <= 2) {
      out[p * C] = (r === g && g === b ? r : 0.299 * r + 0.587 * g + 0.114 * b) / 255;
      if (C === 2) out[p * C + 1] = a / 255;
    } else {
      out[p * C] = r / 255; out[p * C + 1] = g / 255; out[p * C + 2] = b / 255;
      if (C === 4) out[p * C + 3] = a / 255;
    }
  }
  return out;
}
