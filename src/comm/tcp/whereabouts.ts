/**
 * The stall inspector on tcp (after Horovod's; the shm one reads peers' memory, a process cannot):
 * each rank keeps where it is — its calls in progress, its last call, its training step — in
 * memory, and sends none of it in the normal path. When one of its waits for a peer's frames lasts
 * longer than the threshold (stallMs; FrameQueue.take's own timer fires), it asks every peer
 * "where are you?" (a Where frame), and each answers from its event loop (a Here frame) — also
 * while blocked in the native ring, which hands the wait back every 100 ms. After a short window
 * it logs one `paratrain: stall: …` line (stallInspector.ts) naming the ranks that have not
 * arrived: those that have not entered the collective, or did not answer (busy outside the
 * transport: computing, or stopped).
 */
import { currentTrainingStep, reportStall, type RankPosition } from '../stallInspector.ts';
import type { FailureState } from './failure.ts';
import { FrameType, type Frame } from './frame.ts';
import type { PeerLinks } from './peerLinks.ts';

/** A call in progress: the sequence number of a collective (undefined: send/recv) and its words. */
interface CallRecord {
  seq: number | undefined;
  label: () => string;
}

/** What a peer answers to a Where. */
interface HereAnswer {
  /** collectives it has entered */
  entered: number;
  calls: string[];
  last: string | null;
  step: number;
  /** what its owner says it is doing (the parameter server: its devices' steps) */
  note?: string;
  /** the ranks it waits for before it can answer the asking rank's request (the parameter server: the devices a FINISH or a turn waits for) */
  awaiting?: number[];
}

/** the longest the inspector waits for the peers' answers, ms */
const MAX_ANSWER_WINDOW_MS = 1000;

export class Whereabouts {
  private readonly active = new Set<CallRecord>();
  private last: CallRecord | null = null;
  private nextProbe = 1;
  private readonly probes = new Map<number, { answers: Map<number, HereAnswer>; done: () => void }>();
  /** what the owner adds to this rank's answers (e.g. the parameter server's view of its devices) */
  note: (() => string) | undefined;
  /** the ranks this rank waits for before it can answer rank p's request (the parameter server's FINISH and turns) */
  awaiting: ((p: number) => number[]) | undefined;

  constructor(
    private readonly links: PeerLinks,
    private readonly failures: FailureState,
    private readonly entered: () => number,
    readonly stallMs: number,
    private readonly names: readonly string[] | undefined,
  ) {}

  /** A call begins (its words are made only if someone asks). */
  enter(seq: number | undefined, label: () => string): CallRecord {
    const c = { seq, label };
    this.active.add(c);
    return c;
  }

  leave(c: CallRecord): void {
    this.active.delete(c);
    this.last = c;
  }

  /** A Where or Here frame from rank p. */
  onFrame(p: number, f: Frame): void {
    if (f.type === FrameType.Where) {
      const awaiting = this.awaiting?.(p) ?? [];
      const here: HereAnswer = {
        entered: this.entered(),
        calls: [...this.active].map((c) => c.label()),
        last: this.last?.label() ?? null,
        step: currentTrainingStep(),
        ...(this.note ? { note: this.note() } : {}),
        ...(awaiting.length ? { awaiting } : {}),
      };
      this.links
        .outLink(p)
        .then((l) => l.send(FrameType.Here, f.tag, 0, Buffer.from(JSON.stringify(here), 'utf8')))
        .catch(() => {});
      return;
    }
    const probe = this.probes.get(f.tag);
    if (!probe) return;
    try {
      probe.answers.set(p, JSON.parse(f.payload.toString('utf8')) as HereAnswer);
    } catch {
      return;
    }
    if (probe.answers.size >= this.links.size - 1) probe.done();
  }

  /**
   * A wait of this rank (since `since`, for rank p's frames, in `what`) passed the threshold: ask
   * every peer where it is, then report once. `p2p`: a recv (the wait is for p alone).
   */
  async inspect(p: number, what: string, since: number, p2p: boolean): Promise<void> {
    if (this.failures.usable) return;
    const me = this.links.rank,
      size = this.links.size;
    const id = this.nextProbe++;
    const answers = new Map<number, HereAnswer>();
    const window = Math.min(MAX_ANSWER_WINDOW_MS, Math.max(50, this.stallMs / 2));
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, window);
      this.probes.set(id, {
        answers,
        done: () => {
          clearTimeout(timer);
          resolve();
        },
      });
      for (let q = 0; q < size; q++) {
        if (q !== me)
          this.links
            .outLink(q)
            .then((l) => l.send(FrameType.Where, id, 0))
            .catch(() => {});
      }
    });
    this.probes.delete(id);
    if (this.failures.usable) return;
    // the collective waited in (its number is in `what`), and this rank's words for it
    const seq = p2p ? undefined : Number(/collective #(\d+)/.exec(what)?.[1] ?? NaN);
    const mine = [...this.active].find((c) =>
      p2p ? c.seq === undefined && c.label().startsWith(`recv from rank ${p} `) : c.seq === seq,
    );
    const missing: number[] = [];
    const others: RankPosition[] = [];
    for (let q = 0; q < size; q++) {
      if (q === me) continue;
      const a = answers.get(q);
      if (!a) {
        others.push({
          rank: q,
          step: -1,
          call: `no answer within ${window} ms (busy outside communication: computing, or stopped)`,
        });
        if (!p2p) missing.push(q);
        continue;
      }
      const where =
        a.note ?? (a.calls.length ? a.calls.join(' and ') : a.last ? `last seen in ${a.last}` : 'no call yet');
      others.push({ rank: q, step: a.step, call: where });
      if (seq !== undefined && !Number.isNaN(seq) && a.entered <= seq) missing.push(q);
    }
    // a recv: the rank it waits for, or whom that rank itself waits for to answer (a server's other devices)
    const through = p2p
      ? answers.get(p)?.awaiting?.filter((q) => Number.isInteger(q) && q >= 0 && q < size && q !== me)
      : undefined;
    if (through?.length) missing.splice(0, missing.length, ...through);
    else if (p2p || missing.length === 0) missing.splice(0, missing.length, p);
    reportStall({
      rank: me,
      waitingIn: mine?.label() ?? what,
      seconds: (performance.now() - since) / 1000,
      missing,
      others,
      ...(this.names ? { names: this.names } : {}),
    });
  }
}
