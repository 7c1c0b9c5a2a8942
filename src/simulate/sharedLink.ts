/**
 * One direction of a link shared the way TCP flows share it: every transfer in flight gets an
 * equal part of the rate (processor sharing), so two transfers that overlap both finish late,
 * where a first-come-first-served queue would finish one early. A fluid model: no slow start, no
 * losses.
 *
 * Kept in virtual time (the bytes one flow has been able to move since the link was made): it
 * advances at rate/k with k transfers in flight; one of b bytes starting at virtual time V ends
 * when the clock reaches V + b, so the next to end has the smallest such tag: O(log k) per
 * transfer (recomputing every flow's rate at each start and end, O(k), took minutes for a
 * parameter server with 1,024 remote devices).
 */
import { EventQueue } from './eventQueue.ts';

export class SharedLink {
  /** transfers in flight by the virtual time they end at (`t`) */
  private readonly flows = new EventQueue<{ t: number; done: (at: number) => void }>();
  private virtual = 0;
  private last = 0;
  /** bumped at every start and end: a finish time computed before it is stale */
  generation = 0;

  /** `rate`: bytes/s of the whole link. */
  constructor(private readonly rate: number) {}

  /** A transfer of `bytes` from `now`; `done` gets the time its last byte leaves. */
  start(now: number, bytes: number, done: (at: number) => void): void {
    this.advance(now);
    this.flows.push({ t: this.virtual + bytes, done });
    this.generation++;
  }

  /** When the next transfer ends (Infinity: none in flight). */
  nextFinish(): number {
    const f = this.flows.peek();
    return f ? this.last + ((f.t - this.virtual) * this.flows.size) / this.rate : Infinity;
  }

  /** Moves the clock to `now` (at most the next finish) and ends the transfers done by then. */
  finishUntil(now: number): void {
    this.advance(now);
    const ended: ((at: number) => void)[] = [];
    // a relative tolerance: the clock and the tags are sums of floating-point steps
    while ((this.flows.peek()?.t ?? Infinity) <= this.virtual * (1 + 1e-12) + 1e-6) ended.push(this.flows.pop()!.done);
    if (ended.length) this.generation++;
    for (const done of ended) done(now);
  }

  private advance(now: number): void {
    if (now > this.last && this.flows.size) this.virtual += ((now - this.last) * this.rate) / this.flows.size;
    this.last = Math.max(this.last, now);
  }
}
