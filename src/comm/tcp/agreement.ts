/**
 * What else the ranks of a job must agree on besides the config hash, checked by the rendezvous
 * master: each rank registers a list of agreements (e.g. a fingerprint of its training data), and
 * the master refuses the job when one differs from its own, with one line naming both ranks and
 * exactly the fields that differ. The transport does not know what the fields mean: the layer
 * that builds them (the runtime) names them for people.
 */
import { FrameError } from './frame.ts';

export interface Agreement {
  /** what must agree, for messages: "training data" */
  what: string;
  /** compared field by field, e.g. { samples: '4000', 'sample shape': '28×28×1', 'first samples': '9f3a…' } */
  fields: Record<string, string>;
  /** where it came from, shown but never compared (paths differ from host to host) */
  source: string;
  /** the fix, e.g. "every process must read the same dataset" */
  fix: string;
}

const MAX_AGREEMENTS = 8;
const MAX_FIELDS = 16;
const isStr = (v: unknown, max: number): v is string => typeof v === 'string' && v.length <= max;

/** Checks a peer's registered agreements (absent: none); throws FrameError when malformed. */
export function parseAgreements(v: unknown): Agreement[] {
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.length > MAX_AGREEMENTS) throw new FrameError('malformed registration: agreements');
  return v.map((a: unknown) => {
    const q = a as Record<string, unknown>;
    if (
      typeof q !== 'object' ||
      q === null ||
      !isStr(q.what, 100) ||
      !isStr(q.source, 1024) ||
      !isStr(q.fix, 300) ||
      typeof q.fields !== 'object' ||
      q.fields === null ||
      Array.isArray(q.fields)
    ) {
      throw new FrameError('malformed registration: agreements');
    }
    const entries = Object.entries(q.fields as Record<string, unknown>);
    if (entries.length > MAX_FIELDS || entries.some(([k, f]) => k.length > 100 || !isStr(f, 200)))
      throw new FrameError('malformed registration: agreements');
    return {
      what: q.what,
      source: q.source,
      fix: q.fix,
      fields: Object.fromEntries(entries) as Record<string, string>,
    };
  });
}

/**
 * The first agreement in which `theirs` (rank `them`) differs from `mine` (rank `me`), as one line:
 * "process 1's training data differs from process 0's: samples 3000 vs 4000 (from /a vs /b);
 * every process must read the same dataset" — or undefined when they agree.
 */
export function disagreement(
  mine: readonly Agreement[],
  theirs: readonly Agreement[],
  me: string,
  them: string,
): string | undefined {
  for (const a of mine) {
    const b = theirs.find((t) => t.what === a.what);
    if (!b)
      return `${them} did not say what its ${a.what} is, but ${me} did: it runs another version of paratrain; ${a.fix}`;
    const keys = [...new Set([...Object.keys(a.fields), ...Object.keys(b.fields)])];
    const differ = keys.filter((k) => a.fields[k] !== b.fields[k]);
    if (differ.length === 0) continue;
    const diffs = differ.map((k) => `${k} ${b.fields[k] ?? '(none)'} vs ${a.fields[k] ?? '(none)'}`).join(', ');
    const from = b.source === a.source ? `both from ${a.source}` : `from ${b.source} vs ${a.source}`;
    return `${them}'s ${a.what} differs from ${me}'s: ${diffs} (${from}); ${a.fix}`;
  }
  const extra = theirs.find((t) => !mine.some((a) => a.what === t.what));
  return extra
    ? `${me} did not say what its ${extra.what} is, but ${them} did: it runs another version of paratrain; ${extra.fix}`
    : undefined;
}
