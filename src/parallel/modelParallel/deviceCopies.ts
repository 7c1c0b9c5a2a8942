import type { Backend } from '../../kernels/backend.ts';

/**
 * Copies inside one device's arrays, by the backend's copyRows, so that they happen where the
 * arrays live (on a GPU, without a trip through the host): a layer's slice of a gathered
 * activation gradient, a weight slice into the copy a split layer computes on. The row starts
 * are host arrays, kept and grown here.
 */
export class DeviceCopies {
  private from = new Int32Array(0);
  private to = new Int32Array(0);

  constructor(private readonly backend: Backend) {}

  /** shard[rows × (end − start)] = columns [start, end) of full [rows × total]; the host form is takeColumns. */
  columns(full: Float32Array, rows: number, total: number, start: number, end: number, shard: Float32Array): void {
    const width = end - start;
    if (rows === 0 || width === 0) return;
    this.reserve(rows);
    for (let n = 0; n < rows; n++) {
      this.from[n] = n * total + start;
      this.to[n] = n * width;
    }
    this.backend.copyRows(full, this.from, shard, this.to, rows, width, false);
  }

  /** to[at, at + from.length) = from. */
  whole(from: Float32Array, to: Float32Array, at = 0): void {
    if (from.length === 0) return;
    this.reserve(1);
    this.from[0] = 0;
    this.to[0] = at;
    this.backend.copyRows(from, this.from, to, this.to, 1, from.length, false);
  }

  private reserve(rows: number): void {
    if (this.from.length >= rows) return;
    this.from = new Int32Array(rows);
    this.to = new Int32Array(rows);
  }
}
