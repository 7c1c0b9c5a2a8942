/**
 * A binary min-heap of timed events for the event-driven simulations; ties go to the event pushed
 * first, so a simulation is deterministic.
 */
export interface Timed {
  t: number;
}

/** Events by time, first pushed first among equal times. */
export class EventQueue<E extends Timed> {
  private readonly items: { e: E; seq: number }[] = [];
  private seq = 0;

  get size(): number {
    return this.items.length;
  }

  push(e: E): void {
    const items = this.items;
    items.push({ e, seq: this.seq++ });
    let i = items.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(items[i]!, items[p]!)) break;
      [items[i], items[p]] = [items[p]!, items[i]!];
      i = p;
    }
  }

  /** The first event, left in the queue. */
  peek(): E | undefined {
    return this.items[0]?.e;
  }

  pop(): E | undefined {
    const items = this.items;
    if (!items.length) return undefined;
    const top = items[0]!.e;
    const last = items.pop()!;
    if (items.length) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1,
          r = l + 1;
        let m = i;
        if (l < items.length && this.less(items[l]!, items[m]!)) m = l;
        if (r < items.length && this.less(items[r]!, items[m]!)) m = r;
        if (m === i) break;
        [items[i], items[m]] = [items[m]!, items[i]!];
        i = m;
      }
    }
    return top;
  }

  private less(a: { e: E; seq: number }, b: { e: E; seq: number }): boolean {
    return a.e.t < b.e.t || (a.e.t === b.e.t && a.seq < b.seq);
  }
}

/** A resource served first come, first served (a link, a lock, the server's thread). */
export class Fifo {
  free = 0;
  /** Reserves `duration` from the earliest moment ≥ `at`; returns when the service starts. */
  reserve(at: number, duration: number): number {
    const start = Math.max(at, this.free);
    this.free = start + duration;
    return start;
  }
}
