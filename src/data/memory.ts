/**
 * `dataset: memory`: data that lives in the program, given through the library API. `memoryDataset`
 * checks and copies the arrays at once (errors point at the call) and registers them under a name;
 * the config names them (`data: { dataset: memory, train: NAME }`), so a config stays plain data
 * that can be written to YAML, hashed and sent to worker threads.
 */
import type { Dataset } from './dataset.ts';
import type { DataTask } from './spec.ts';

/** Samples as one flat array with a shape: x holds N × (product of shape[1..]) values. */
export interface MemoryArrays {
  x: ArrayLike<number>;
  /** [N, ...per-sample shape], e.g. [150, 4] or [1000, 28, 28, 1] */
  shape: readonly number[];
  /** N class indices, or N × k targets (regression values, multi-label 0/1) */
  y: ArrayLike<number>;
  /** default: classification when y is an integer typed array or whole numbers, regression for Float32Array/Float64Array */
  task?: DataTask;
  classNames?: string[];
}

/** Samples one at a time: `get(i)` for i in 0..length-1. */
export interface MemorySamples {
  length: number;
  get(i: number): { x: ArrayLike<number>; y: number | ArrayLike<number> };
  /** per-sample shape (default [x.length]) */
  shape?: readonly number[];
  /** default: classification when every y is a whole number, else regression */
  task?: DataTask;
  classNames?: string[];
}

const registered = new Map<string, Dataset>();
let unnamed = 0;

const isFloatArray = (a: unknown) => a instanceof Float32Array || a instanceof Float64Array;

function fromArrays(src: MemoryArrays, name: string): Dataset {
  const where = `memoryDataset(${JSON.stringify(name)})`;
  const shape = [...src.shape];
  if (shape.length < 2 || shape.some((d) => !Number.isSafeInteger(d) || d < 1)) {
    throw new Error(
      `${where}: shape must be [N, ...per-sample dimensions] of positive whole numbers, e.g. [150, 4], got [${shape.join(', ')}]`,
    );
  }
  const count = shape[0]!,
    per = shape.slice(1).reduce((a, b) => a * b, 1);
  if (src.x.length !== count * per)
    throw new Error(`${where}: x holds ${src.x.length} values but shape [${shape.join(', ')}] needs ${count * per}`);
  if (src.y.length === 0 || src.y.length % count !== 0)
    throw new Error(`${where}: y holds ${src.y.length} values, not one or more per sample for ${count} samples`);
  const k = src.y.length / count;
  const task = src.task ?? (isFloatArray(src.y) || k > 1 ? 'regression' : 'classification');
  return build(where, {
    images: Float32Array.from(src.x),
    sampleShape: shape.slice(1),
    count,
    y: Float64Array.from(src.y),
    k,
    task,
    classNames: src.classNames,
  });
}

function fromSamples(src: MemorySamples, name: string): Dataset {
  const where = `memoryDataset(${JSON.stringify(name)})`;
  const count = src.length;
  if (!Number.isSafeInteger(count) || count < 1)
    throw new Error(`${where}: length must be a whole number ≥ 1, got ${count}`);
  const first = src.get(0);
  const sampleShape = src.shape ? [...src.shape] : [first.x.length];
  const per = sampleShape.reduce((a, b) => a * b, 1);
  const k = typeof first.y === 'number' ? 1 : first.y.length;
  const images = new Float32Array(count * per),
    y = new Float64Array(count * k);
  let whole = true;
  for (let i = 0; i < count; i++) {
    const s = i === 0 ? first : src.get(i);
    if (!s || s.x === undefined || s.y === undefined)
      throw new Error(`${where}: get(${i}) returned ${JSON.stringify(s)}; it must return { x, y }`);
    if (s.x.length !== per)
      throw new Error(
        `${where}: get(${i}).x holds ${s.x.length} values, the samples hold ${per} (shape [${sampleShape.join(', ')}])`,
      );
    const ys = typeof s.y === 'number' ? [s.y] : s.y;
    if (ys.length !== k) throw new Error(`${where}: get(${i}).y holds ${ys.length} values, sample 0's holds ${k}`);
    images.set(Float32Array.from(s.x), i * per);
    for (let j = 0; j < k; j++) {
      y[i * k + j] = ys[j]!;
      whole &&= Number.isInteger(ys[j]!);
    }
  }
  const task = src.task ?? (k === 1 && whole ? 'classification' : 'regression');
  return build(where, { images, sampleShape, count, y, k, task, classNames: src.classNames });
}

function build(
  where: string,
  o: {
    images: Float32Array;
    sampleShape: number[];
    count: number;
    y: Float64Array;
    k: number;
    task: DataTask;
    classNames?: string[];
  },
): Dataset {
  const { count, y, k, task } = o;
  const ds: Dataset = {
    name: where,
    images: o.images,
    labels: new Int32Array(count),
    count,
    sampleShape: o.sampleShape,
    classes: 0,
    task,
  };
  if (task === 'classification') {
    if (k !== 1)
      throw new Error(
        `${where}: classification takes one class index per sample, y holds ${k}; for several 0/1 labels use task: 'multiLabel'`,
      );
    let max = -1;
    for (let i = 0; i < count; i++) {
      const v = y[i]!;
      if (!Number.isInteger(v) || v < 0)
        throw new Error(
          `${where}: y[${i}] = ${v} is not a class index (a whole number ≥ 0); for real-valued targets use task: 'regression'`,
        );
      ds.labels[i] = v;
      max = Math.max(max, v);
    }
    ds.classes = o.classNames ? o.classNames.length : max + 1;
    if (max >= ds.classes) throw new Error(`${where}: label ${max} is outside the ${ds.classes} classNames`);
  } else {
    for (let i = 0; i < y.length; i++) {
      if (!Number.isFinite(y[i]!))
        throw new Error(`${where}: target ${y[i]} of sample ${Math.floor(i / k)} is not a finite number`);
      if (task === 'multiLabel' && y[i] !== 0 && y[i] !== 1)
        throw new Error(`${where}: target ${y[i]} of sample ${Math.floor(i / k)} is not 0 or 1 (multiLabel)`);
    }
    Object.assign(ds, { targets: Float32Array.from(y), targetSize: k, classes: task === 'multiLabel' ? k : 0 });
  }
  if (o.classNames) ds.classNames = [...o.classNames];
  return ds;
}

/**
 * Registers in-memory samples for `data: { dataset: 'memory', train: NAME }` and returns NAME (given,
 * or `memory-1`, `memory-2`, …). The arrays are checked and copied now (later changes to them are
 * not seen). Give it `{ x, shape: [N, ...], y }` or `{ length, get(i) }`. Registering a name again
 * replaces its data.
 */
export function memoryDataset(source: MemoryArrays | MemorySamples, name?: string): string {
  const key = name ?? `memory-${++unnamed}`;
  if (typeof key !== 'string' || key === '') throw new Error('memoryDataset: the name must be a non-empty string');
  const ds =
    'get' in source && typeof source.get === 'function'
      ? fromSamples(source, key)
      : fromArrays(source as MemoryArrays, key);
  ds.name = `memory dataset ${JSON.stringify(key)}`;
  registered.set(key, ds);
  return key;
}

/** Forgets a registered in-memory dataset (frees its copy); true when there was one. */
export function removeMemoryDataset(name: string): boolean {
  return registered.delete(name);
}

/** A registered dataset (a fresh copy of its samples: loading may normalise them in place). */
export function memoryDatasetNamed(name: string, field: string): Dataset {
  const ds = registered.get(name);
  if (!ds) {
    const known = [...registered.keys()];
    throw new Error(
      `${field}: no in-memory dataset named ${JSON.stringify(name)} in this process${known.length ? ` (registered: ${known.join(', ')})` : ''}; ` +
        `register it with memoryDataset(arrays, ${JSON.stringify(name)}) before train() (every process of a job registers its own)`,
    );
  }
  return {
    ...ds,
    images: ds.images.slice(),
    sampleShape: [...ds.sampleShape],
    ...(ds.targets ? { targets: ds.targets.slice() } : {}),
  };
}
