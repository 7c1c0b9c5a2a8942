/**
 * Where the data frames of one collective from one peer will land, in arrival order: frames that
 * only need storing (allgather, broadcast) are read by the kernel straight into the caller's
 * buffer instead of a payload slot, saving a copy of every byte received. Frames that are reduced
 * (reduce-scatter) still go to slots.
 *
 * A plan follows the stream: each announced frame (its header parsed, payload not yet read)
 * advances a cursor through the collective's ranges in the order the ring receives them. A frame
 * that does not fit the plan (another call, a length that crosses a range) breaks it: that frame
 * and every later one go to slots, where the collective's own checks report the mismatch.
 */
import type { FrameHeader } from './frame.ts';

export interface LandingRange {
  /** floats [start, end) of the caller's buffer, in the order the frames arrive */
  start: number;
  end: number;
  /** read these frames into the caller's buffer (else: a slot) */
  land: boolean;
}

export class LandingPlan {
  private i = 0;
  private pos: number;
  private broken = false;

  constructor(
    private readonly bytes: Buffer,
    private readonly expect: Pick<FrameHeader, 'type' | 'aux' | 'flags' | 'arg'>,
    private readonly ranges: readonly LandingRange[],
  ) {
    this.pos = ranges[0]?.start ?? 0;
    this.settle();
  }

  /** Skips `floats` floats announced before the plan existed (they went to slots). */
  skip(floats: number): void {
    while (floats > 0 && !this.broken) {
      const r = this.ranges[this.i];
      if (!r) {
        this.broken = true;
        return;
      }
      const m = Math.min(floats, r.end - this.pos);
      this.pos += m;
      floats -= m;
      this.settle();
    }
  }

  /** The bytes a frame with header `h` should be read into, or undefined for a slot. */
  take(h: FrameHeader): Buffer | undefined {
    if (this.broken) return undefined;
    const r = this.ranges[this.i];
    const m = h.length / 4;
    const e = this.expect;
    if (
      !r ||
      h.type !== e.type ||
      h.aux !== e.aux ||
      h.flags !== e.flags ||
      h.arg !== e.arg ||
      !Number.isInteger(m) ||
      m === 0 ||
      this.pos + m > r.end
    ) {
      this.broken = true;
      return undefined;
    }
    const at = this.pos;
    this.pos += m;
    this.settle();
    return r.land ? this.bytes.subarray(at * 4, (at + m) * 4) : undefined;
  }

  /** Moves past finished (and empty) ranges. */
  private settle(): void {
    while (this.i < this.ranges.length && this.pos >= this.ranges[this.i]!.end) {
      this.i++;
      const next = this.ranges[this.i];
      if (next) this.pos = next.start;
    }
  }
}
