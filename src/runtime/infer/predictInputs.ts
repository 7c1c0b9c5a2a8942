/**
 * The input files of `paratrain predict`, read into samples of the model's input shape: CSV rows
 * (csvInputs.ts: one sample per row, columns by the checkpoint's names when the file has a header;
 * a label column may be named, and is then kept as the true label), NumPy `.npy` arrays
 * ((N, …shape), (N, H, W) for an [H, W, 1] model, (N, values) or one sample), and PNG/JPEG images
 * (one sample each). Values are raw, as the training data held them (images and uint8 arrays
 * scaled to [0, 1], as the datasets scale them); normalisation is predict's. Every error names the
 * file (and line) and the shape the model takes.
 */
import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { formatShape, shapeSize } from '../../tensor/shape.ts';
import { parseNpy } from '../../data/npy.ts';
import { decodeImage, imageToSample } from '../../data/imageDecode.ts';
import type { CsvColumnNames } from '../../data/csvColumns.ts';
import { readCsvSamples } from './csvInputs.ts';

export interface InputSamples {
  /** count × values per sample */
  data: Float32Array;
  count: number;
  /** where each sample came from: `file`, `file:line` (CSV) or `file[i]` (.npy) */
  sources: string[];
  /** the label column's value per sample, when one was named */
  truth?: string[];
  /** one line each for people (a CSV column left out, a header that could not be checked) */
  notes: string[];
}

export interface InputOptions {
  /** a CSV column holding the true label: its header name, or its 0-based index (negative: from the end) */
  labelColumn?: string;
  /** resize images to the model's H×W (the config's data.resize, as training did); default false: another size is an error */
  resize?: boolean;
  /** a CSV run's columns by name (the checkpoint's): CSV files with a header are read by them */
  columns?: CsvColumnNames;
  /** the CSV field separator (a CSV run's data.delimiter); default ',' */
  delimiter?: string;
}

export const INPUT_KINDS = 'CSV rows (.csv), NumPy arrays (.npy) and images (.png, .jpg)';

function readBytes(file: string): Uint8Array {
  try {
    return readFileSync(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new Error(
      code === 'ENOENT'
        ? `${file}: no such input file`
        : code === 'EISDIR'
          ? `${file} is a directory; give the files in it`
          : `${file}: cannot read it (${(e as Error).message})`,
    );
  }
}

/** Reads every file into one set of samples, in order. */
export function readPredictInputs(
  files: readonly string[],
  inputShape: readonly number[],
  opts: InputOptions = {},
): InputSamples {
  if (files.length === 0) throw new Error(`predict: no input files; give ${INPUT_KINDS}`);
  const per = shapeSize(inputShape);
  const parts: Float32Array[] = [];
  const sources: string[] = [];
  const truth: string[] = [];
  const notes: string[] = [];
  for (const file of files) {
    const ext = extname(file).toLowerCase();
    if (ext === '.csv') {
      const r = readCsvSamples(new TextDecoder().decode(readBytes(file)), file, inputShape, opts);
      parts.push(r.data);
      sources.push(...r.sources);
      notes.push(...r.notes);
      if (r.truth) truth.push(...r.truth);
    } else if (ext === '.npy') {
      const r = npySamples(readBytes(file), file, inputShape);
      parts.push(r.data);
      for (let i = 0; i < r.count; i++) sources.push(`${file}[${i}]`);
    } else if (ext === '.png' || ext === '.jpg' || ext === '.jpeg') {
      parts.push(imageSample(readBytes(file), file, inputShape, opts.resize === true));
      sources.push(file);
    } else {
      throw new Error(`${file}: unknown input type '${ext || '(no extension)'}'; predict reads ${INPUT_KINDS}`);
    }
  }
  if (opts.labelColumn !== undefined && truth.length !== sources.length) {
    throw new Error(
      `--label-column ${opts.labelColumn}: only CSV inputs have a label column; give CSV files only, or leave it out`,
    );
  }
  const data = new Float32Array(sources.length * per);
  let at = 0;
  for (const p of parts) {
    data.set(p, at);
    at += p.length;
  }
  return { data, count: sources.length, sources, notes, ...(opts.labelColumn !== undefined ? { truth } : {}) };
}

/** An image file as one sample of the model's [H, W, C] (as the image-folder dataset decodes, resizes and scales it). */
function imageSample(bytes: Uint8Array, file: string, inputShape: readonly number[], resize: boolean): Float32Array {
  if (inputShape.length !== 3) {
    throw new Error(
      `${file}: an image, but the model takes ${formatShape(inputShape)} (features, not [height, width, channels]); give CSV rows or a .npy file`,
    );
  }
  const [H, W, C] = inputShape as [number, number, number];
  if (C < 1 || C > 4)
    throw new Error(
      `${file}: the model takes ${C} channels per pixel (model.input ${formatShape(inputShape)}); images give 1 (grey), 2 (grey, alpha), 3 (RGB) or 4 (RGBA)`,
    );
  const out = new Float32Array(H * W * C);
  imageToSample(decodeImage(bytes, file), [H, W, C], resize, file, out, 0);
  return out;
}

const sameDims = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((d, i) => d === b[i]);

/**
 * A .npy array as samples: (N, …inputShape), (N, values per sample) or one sample of inputShape;
 * for a model of one channel ([H, W, 1]) also (N, H, W) and one (H, W) image.
 */
function npySamples(
  bytes: Uint8Array,
  file: string,
  inputShape: readonly number[],
): { data: Float32Array; count: number } {
  const { shape, dtype, data: raw } = parseNpy(bytes, file);
  const per = shapeSize(inputShape);
  // the shapes one sample may have: model.input, and without its channel axis when that is 1
  const sampleShapes = [inputShape];
  if (inputShape.length === 3 && inputShape[2] === 1) sampleShapes.push(inputShape.slice(0, 2));
  const rest = shape.slice(1);
  const fits = sampleShapes.some((s) => sameDims(rest, s)) || (rest.length === 1 && rest[0] === per);
  const single = sampleShapes.some((s) => sameDims(shape, s));
  if (!fits && !single) {
    const forms = [...sampleShapes.map((s) => `(N, ${s.join(', ')})`), `(N, ${per})`];
    throw new Error(
      `${file}: an array of shape (${shape.join(', ')}) does not hold samples of ${formatShape(inputShape)}; ` +
        `expected ${forms.slice(0, -1).join(', ')} or ${forms[forms.length - 1]}`,
    );
  }
  // uint8 values are pixels 0–255, scaled as the npy dataset scales them (like IDX and image files)
  const scale = dtype === 'u1' ? 1 / 255 : 1;
  const values = new Float32Array(raw.length);
  for (let i = 0; i < raw.length; i++) values[i] = raw[i]! * scale;
  return { data: values, count: single ? 1 : shape[0]! };
}
