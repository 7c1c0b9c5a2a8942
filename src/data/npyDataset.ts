/**
 * `dataset: npy`: features x [N, ...] and labels y [N] (class indices) or [N, k] (regression values,
 * multi-label 0/1) from two .npy files or one .npz with named arrays.
 */
import type { Dataset } from './dataset.ts';
import { npzNames, parseNpy, parseNpz, type NpyArray } from './npy.ts';
import { readDataFile } from './files.ts';
import type { DataTask, NpyFilesSpec } from './spec.ts';

/** The x and y arrays of one split, with the names to show in errors. */
interface XY {
  x: NpyArray;
  y: NpyArray;
  xName: string;
  yName: string;
}

function isZip(bytes: Uint8Array): boolean {
  return bytes[0] === 0x50 && bytes[1] === 0x4b;
}

/** Reads a split's arrays; `files` are resolved paths, `field` the config key for messages. */
export function readXY(files: NpyFilesSpec, arrays: { x: string; y: string }, field: string): XY {
  if (typeof files !== 'string') {
    return {
      x: parseNpy(readDataFile(files.x, `${field}.x`), files.x),
      y: parseNpy(readDataFile(files.y, `${field}.y`), files.y),
      xName: files.x,
      yName: files.y,
    };
  }
  const bytes = readDataFile(files, field);
  if (!isZip(bytes)) {
    throw new Error(
      `${field}: ${files} is not an .npz archive; one .npy holds one array, so give { x: features.npy, y: labels.npy } or save both with numpy.savez(path, x=x, y=y)`,
    );
  }
  const got = parseNpz(bytes, files, [arrays.x, arrays.y]);
  for (const key of ['x', 'y'] as const) {
    if (!got.has(arrays[key])) {
      throw new Error(
        `data.arrays.${key}: ${files} has no array ${JSON.stringify(arrays[key])}; it holds ${npzNames(bytes).join(', ') || 'nothing'}; name the ${key === 'x' ? 'features' : 'labels'} array in data.arrays.${key}`,
      );
    }
  }
  return {
    x: got.get(arrays.x)!,
    y: got.get(arrays.y)!,
    xName: `${files}[${arrays.x}]`,
    yName: `${files}[${arrays.y}]`,
  };
}

/** Features as float32: uint8 values are pixels (scaled by 1/255, like IDX and image files), others as they are (the registry checks they are finite). */
function features(x: NpyArray, name: string): Float32Array {
  if (x.shape.length < 2) {
    throw new Error(
      `${name}: features have shape (${x.shape.join(', ')}); x needs a sample axis first and at least one more: [N, features] or [N, H, W, C]`,
    );
  }
  if (x.data instanceof Float32Array) return x.data;
  const out = new Float32Array(x.data.length);
  const scale = x.dtype === 'u1' ? 1 / 255 : 1;
  for (let i = 0; i < out.length; i++) out[i] = x.data[i]! * scale;
  return out;
}

/** One split as a Dataset. `task` decides how y is read. */
export function xyToDataset(xy: XY, task: DataTask, classNames: string[] | undefined): Dataset {
  const { x, y, xName, yName } = xy;
  const count = x.shape[0]!;
  if (y.shape[0] !== count) {
    throw new Error(
      `${xName} has ${count} samples but ${yName} has ${y.shape[0] ?? 0} labels; x and y must have the same first dimension`,
    );
  }
  const images = features(x, xName);
  const ds: Dataset = {
    name: xName,
    images,
    labels: new Int32Array(count),
    count,
    sampleShape: x.shape.slice(1),
    classes: 0,
    task,
  };
  if (task === 'classification') {
    if (y.shape.length > 2 || (y.shape.length === 2 && y.shape[1] !== 1)) {
      throw new Error(
        `${yName}: labels have shape (${y.shape.join(', ')}); classification takes one class index per sample, shape (N,); for several 0/1 labels per sample set data.task: multiLabel`,
      );
    }
    if (y.dtype === 'b1')
      throw new Error(
        `${yName}: boolean labels; save them as integers (y.astype(numpy.int64)) for 2 classes, or set data.task: multiLabel`,
      );
    for (let i = 0; i < count; i++) {
      const v = y.data[i]!;
      if (!Number.isInteger(v) || v < 0) {
        throw new Error(
          `${yName}: label ${v} of sample ${i} is not a class index (a whole number ≥ 0); for real-valued targets set data.task: regression`,
        );
      }
      ds.labels[i] = v;
    }
    if (classNames) ds.classNames = classNames;
    return ds;
  }
  const targetSize = y.shape.length === 1 ? 1 : y.shape.slice(1).reduce((a, b) => a * b, 1);
  const targets = new Float32Array(count * targetSize);
  for (let i = 0; i < targets.length; i++) {
    const v = y.data[i]!;
    if (!Number.isFinite(v))
      throw new Error(`${yName}: target ${v} of sample ${Math.floor(i / targetSize)} is not a finite number`);
    if (task === 'multiLabel' && v !== 0 && v !== 1)
      throw new Error(
        `${yName}: target ${v} of sample ${Math.floor(i / targetSize)} is not 0 or 1; multi-label targets are 0/1 per class`,
      );
    targets[i] = v;
  }
  Object.assign(ds, { targets, targetSize, classes: task === 'multiLabel' ? targetSize : 0 });
  if (classNames) ds.classNames = classNames;
  return ds;
}
