/**
 * How long a waiting rank busy-polls before it sleeps, learned from its own recent waits.
 *
 * Sleeping (Atomics.wait, a futex) costs the wake-up once the peer arrives: on a VM the host has to
 * wake a halted vCPU first, and in a lockstep step the peer's work waits for it. Spinning costs the
 * core: nothing when every rank has one of its own and the peer is about to arrive, but the peer's
 * time when they share one. So a waiter spins long (`maxMicros`) while most of its recent waits
 * ended within that, and briefly (`minMicros`) once most did not: a peer descheduled or far behind,
 * which is what an oversubscribed machine looks like. (libgomp's default is alike: spin, and
 * spin little when there are more threads than CPUs.) `PARATRAIN_SHM_SPIN` overrides it; compare
 * the two with `npm run bench -- throughput`.
 */
export class AdaptiveSpin {
  /** the share of recent waits that ended within maxMicros: a moving average over about `window` waits */
  private shortShare = 1;

  constructor(
    readonly minMicros = 50,
    readonly maxMicros = 1000,
    readonly window = 16,
  ) {
    if (!(minMicros >= 0 && maxMicros >= minMicros && window >= 1)) {
      throw new RangeError(
        `AdaptiveSpin: need 0 ≤ minMicros ≤ maxMicros and window ≥ 1, got ${minMicros}, ${maxMicros}, ${window}`,
      );
    }
  }

  /** The spin for the next wait (µs). */
  get micros(): number {
    return this.shortShare >= 0.5 ? this.maxMicros : this.minMicros;
  }

  /** A wait that has ended after `waitedMs` (spinning or sleeping: a short one counts either way, so a long spin comes back). */
  record(waitedMs: number): void {
    const short = waitedMs * 1000 <= this.maxMicros ? 1 : 0;
    this.shortShare += (short - this.shortShare) / this.window;
  }
}
