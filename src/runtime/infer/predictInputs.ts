/**
 * The input files of `paratrain predict`, read into samples of the model's input shape: CSV rows
 * (one sample per row, optionally a header; a label column may be named, and is then left out of
 * the features and kept as the true label), NumPy `.npy` arrays ((N, …shape) or (N, values) or
 * one sample), and PNG/JPEG images (one sample each). Values are raw, as the training data held
 * them (images and uint8 arrays scaled to [0, 1], as the datasets scale them); normalisation is predict's. Every error
 * names the file (and line) and the shape the model takes.
 */
import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { formatShape, shapeSize } from '../../tensor/shape.ts';
import { parseNpy } from '../../data/npy.ts';
import { decodeImage, imageToSample } from '../../data/imageDecode.ts';

export interface InputSamples {
  /** count × values per sample */
  data: Float32Array;
  count: number;
  /** where each sample came from: `file`, `file:line` (CSV) or `file[i]` (.npy) */
  sources: string[];
  /** the label column's value per sample, when one was named */
  truth?: string[];
}

export interface InputOptions {
  /** a CSV column holding the true label: its header name, or its 0-based index (negative: from the end) */
  labelColumn?: string;
  /** resize images to the model's H×W (the config's data.resize, as training did); default false: another size is an error */
  resize?: boolean;
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
  for (const file of files) {
    const ext = extname(file).toLowerCase();
    if (ext === '.csv') {
      const r = readCsvSamples(new TextDecoder().decode(readBytes(file)), file, inputShape, opts.labelColumn);
      parts.push(r.data);
      sources.push(...r.sources);
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
  return { data, count: sources.length, sources, ...(opts.labelColumn !== undefined ? { truth } : {}) };
}

/** One CSV line's cells (double quotes may enclose a cell with commas; `""` is a quote). */
function splitCsvLine(line: string): string[] {
  const cells: string[] = [];
  let cell = '',
    quoted = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (quoted) {
      if (ch === '"' && line[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else cell += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ',') {
      cells.push(cell.trim());
      cell = '';
    } else cell += ch;
  }
  cells.push(cell.trim());
  return cells;
}

const isNumber = (s: string) => s !== '' && Number.isFinite(Number(s));

/** CSV text → samples; `file` names it in messages. */
export function readCsvSamples(
  text: string,
  file: string,
  inputShape: readonly number[],
  labelColumn?: string,
): InputSamples {
  const per = shapeSize(inputShape);
  const rows = text
    .split(/\r?\n/)
    .map((line, i) => ({ line: i + 1, cells: splitCsvLine(line) }))
    .filter((r) => r.cells.some((c) => c !== ''));
  if (rows.length === 0) throw new Error(`${file}: no rows; a CSV input holds one sample per row`);
  const width = rows[0]!.cells.length;
  // a label column by index is known before the header; by name it is found in the header
  const byIndex = labelColumn !== undefined && /^-?\d+$/.test(labelColumn) ? Number(labelColumn) : undefined;
  const indexOf = (n: number) => (n < 0 ? width + n : n);
  const first = rows[0]!.cells;
  const header = first.some((c, i) => !isNumber(c) && (byIndex === undefined || i !== indexOf(byIndex))) ? first : null;
  let label: number | undefined;
  if (labelColumn !== undefined) {
    if (byIndex !== undefined) label = indexOf(byIndex);
    else {
      label = header?.indexOf(labelColumn);
      if (label === undefined || label < 0) {
        throw new Error(
          `${file}: no column named '${labelColumn}' (--label-column)${header ? `; the header has ${header.join(', ')}` : "; the file has no header, give the column's index"}`,
        );
      }
    }
    if (label < 0 || label >= width)
      throw new Error(`${file}: --label-column ${labelColumn} is outside the ${width} columns`);
  }
  const body = header ? rows.slice(1) : rows;
  const data = new Float32Array(body.length * per);
  const sources: string[] = [];
  const truth: string[] = [];
  const takes = `the model takes ${formatShape(inputShape)} = ${per} values per sample`;
  body.forEach((row, s) => {
    if (row.cells.length !== width)
      throw new Error(`${file}:${row.line}: ${row.cells.length} columns, the first row has ${width}`);
    let k = 0;
    row.cells.forEach((cell, c) => {
      if (c === label) {
        truth.push(cell);
        return;
      }
      if (!isNumber(cell)) {
        const name = header ? `column '${header[c]}' (${c})` : `column ${c}`;
        throw new Error(
          `${file}:${row.line}: ${name} holds ${cell === '' ? 'nothing' : `'${cell}'`}, not a number${labelColumn === undefined ? ' (if it is the label, name it with --label-column)' : ''}`,
        );
      }
      if (k < per) data[s * per + k] = Number(cell);
      k++;
    });
    if (k !== per)
      throw new Error(
        `${file}:${row.line}: ${k} feature values; ${takes}${label === undefined && k === per + 1 ? ' (one more: is a column the label? name it with --label-column)' : ''}`,
      );
    sources.push(`${file}:${row.line}`);
  });
  return { data, count: body.length, sources, ...(label !== undefined ? { truth } : {}) };
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

/** A .npy array as samples: (N, …inputShape), (N, values per sample) or one sample of inputShape. */
function npySamples(
  bytes: Uint8Array,
  file: string,
  inputShape: readonly number[],
): { data: Float32Array; count: number } {
  const { shape, dtype, data: raw } = parseNpy(bytes, file);
  const per = shapeSize(inputShape);
  const rest = shape.slice(1);
  const fits =
    (rest.length === inputShape.length && rest.every((d, i) => d === inputShape[i])) ||
    (rest.length === 1 && rest[0] === per);
  const single = shape.length === inputShape.length && shape.every((d, i) => d === inputShape[i]);
  if (!fits && !single) {
    throw new Error(
      `${file}: an array of shape (${shape.join(', ')}) does not hold samples of ${formatShape(inputShape)}; ` +
        `expected (N, ${inputShape.join(', ')}) or (N, ${per})`,
    );
  }
  // uint8 values are pixels 0–255, scaled as the npy dataset scales them (like IDX and image files)
  const scale = dtype === 'u1' ? 1 / 255 : 1;
  const values = new Float32Array(raw.length);
  for (let i = 0; i < raw.length; i++) values[i] = raw[i]! * scale;
  return { data: values, count: single ? 1 : shape[0]! };
}
