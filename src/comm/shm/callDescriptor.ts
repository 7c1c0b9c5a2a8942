/**
 * Every collective starts by writing a call descriptor (operation, length, buffer kind and
 * registration, root, reduce op) into this rank's slot of the control block; at the call's first
 * barrier each rank checks that all made the same call. A mismatch is an error naming every
 * rank's call, not a silent corruption.
 */
import type { ReduceOp } from '../communicator.ts';
import { CollectiveMismatchError } from './errors.ts';
import { DESC_WORDS, type Layout } from './layout.ts';
import type { Match } from './registry.ts';
import { currentTrainingStep } from '../stallInspector.ts';

export const OP_BARRIER = 1,
  OP_ALLREDUCE = 2,
  OP_REDUCE_SCATTER = 3,
  OP_ALLGATHER = 4,
  OP_BROADCAST = 5;
const OP_NAMES = ['?', 'barrier', 'allreduce', 'reduceScatter', 'allgather', 'broadcast'];
/** reduce ops by their number in a descriptor */
export const REDOPS: ReduceOp[] = ['sum', 'mean'];

export class CallDescriptors {
  private seq = 0;

  constructor(
    private readonly control: Int32Array,
    private readonly layout: Layout,
    private readonly rank: number,
    private readonly size: number,
  ) {}

  /** Writes this rank's descriptor of the call about to happen (checked at the first barrier). */
  write(op: number, n: number, m: Match | null, root: number, redop: number): void {
    const seq = this.seq++;
    const base = this.layout.descBase + ((seq & 1) * this.size + this.rank) * DESC_WORDS;
    const c = this.control;
    Atomics.store(c, base, seq | 0);
    Atomics.store(c, base + 1, op);
    Atomics.store(c, base + 2, n);
    Atomics.store(c, base + 3, m ? 1 : 0);
    Atomics.store(c, base + 4, m ? m.reg.id : -1);
    Atomics.store(c, base + 5, m ? m.offset : -1);
    Atomics.store(c, base + 6, root);
    Atomics.store(c, base + 7, redop);
    // where this rank is, for a peer's stall report
    Atomics.store(c, this.layout.stepBase + this.rank, currentTrainingStep());
  }

  /** Rank q's latest call as words ('allreduce #57 of 11072 floats') and its training step, for the stall inspector. */
  position(q: number): { step: number; call: string } {
    const c = this.control,
      G = this.size;
    const slot = (k: number) => this.layout.descBase + (k * G + q) * DESC_WORDS;
    const a = slot(0),
      b = slot(1);
    const base = Atomics.load(c, b) > Atomics.load(c, a) ? b : a;
    const op = Atomics.load(c, base + 1),
      n = Atomics.load(c, base + 2);
    const call =
      op === 0
        ? 'no collective yet'
        : op === OP_BARRIER
          ? `barrier #${Atomics.load(c, base)}`
          : `${OP_NAMES[op] ?? `op ${op}`} #${Atomics.load(c, base)} of ${n} floats`;
    return { step: Atomics.load(c, this.layout.stepBase + q), call };
  }

  /** Throws CollectiveMismatchError unless every rank wrote the same descriptor for the current call. */
  check(): void {
    const seq = this.seq - 1;
    const c = this.control,
      G = this.size;
    const at = (q: number) => this.layout.descBase + ((seq & 1) * G + q) * DESC_WORDS;
    const mine = at(this.rank);
    let ok = true;
    for (let q = 0; q < G && ok; q++) {
      const b = at(q);
      for (let k = 0; k < DESC_WORDS; k++) {
        if (Atomics.load(c, b + k) !== Atomics.load(c, mine + k)) {
          ok = false;
          break;
        }
      }
    }
    if (ok) return;
    const calls = Array.from({ length: G }, (_, q) => {
      const b = at(q);
      const w = (k: number) => Atomics.load(c, b + k);
      const op = OP_NAMES[w(1)] ?? `op ${w(1)}`;
      const args: string[] = [];
      if (w(1) !== OP_BARRIER)
        args.push(
          `length ${w(2)}`,
          w(3) ? `registered buffer #${w(4)}${w(5) ? ` at +${w(5)}` : ''}` : 'unregistered buffer',
        );
      if (w(1) === OP_BROADCAST) args.push(`root ${w(6)}`);
      if (w(1) === OP_ALLREDUCE || w(1) === OP_REDUCE_SCATTER) args.push(REDOPS[w(7)] ?? `op ${w(7)}`);
      return `rank ${q}: call #${w(0)} ${op}(${args.join(', ')})`;
    });
    throw new CollectiveMismatchError(
      `ranks made different collective calls: ${calls.join('; ')}. Every rank must call the same collectives in the same order with the same lengths (and register the same buffers)`,
    );
  }
}
