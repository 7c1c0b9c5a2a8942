/**
 * A kernel's scalar parameters, written in the order of its WGSL `Params` struct, whose fields are
 * all 4-byte u32, i32 or f32 (so the struct has no padding before a trailing field).
 */
export class Params {
  private readonly view: DataView;
  private at = 0;
  constructor(readonly bytes = new ArrayBuffer(256)) {
    this.view = new DataView(bytes);
  }
  u32(v: number): this {
    this.view.setUint32(this.at, v, true);
    this.at += 4;
    return this;
  }
  i32(v: number): this {
    this.view.setInt32(this.at, v, true);
    this.at += 4;
    return this;
  }
  f32(v: number): this {
    this.view.setFloat32(this.at, v, true);
    this.at += 4;
    return this;
  }
  /** bytes written */
  get size(): number {
    return this.at;
  }
}
