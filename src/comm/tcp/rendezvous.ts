/**
 * Forming a TCP world: every rank registers with the master (rank 0), which checks the job is
 * consistent and answers with the table of every rank's data address.
 * This file holds the messages and their checks; rendezvousMaster.ts is rank 0's side of the
 * exchange, rendezvousRank.ts every other rank's.
 *
 *   rank k → master   (authenticated connection, purpose "rendezvous")
 *                     Register { rank, worldSize, host, port, hostname, pid, configHash, maxFrameBytes, agreements? }
 *   master → rank k   Table { job, peers: [{ rank, host, port, hostname, pid }], maxFrameBytes }
 *                  or Refuse { kind: 'config' | 'timeout' | 'rendezvous', message, rank?, missing? }
 *
 * The master refuses the whole job — every registered rank and any that registers later, until
 * its deadline — as soon as it sees: a config hash different from its own (ConfigMismatchError
 * naming the rank), a different world size, a rank out of range, or two processes claiming one
 * rank (RendezvousError); or when its deadline passes with ranks missing (CommTimeoutError naming
 * them, and their expected hosts when `hosts` was given). Every rank thus fails with the same
 * clear message instead of hanging. `job` is a fresh random id: data connections must present it.
 * Registered `agreements` (agreement.ts: e.g. the data's fingerprint) that differ from rank 0's are
 * refused like a different config hash. Strangers (connections that have not proved the secret) are
 * admitted by a StrangerGate (strangers.ts): per-address limits, a 2 s deadline, the oldest dropped
 * to make room, so they cannot shut out a real rank; a timeout names the flood it dropped meanwhile.
 */
import { CommTimeoutError, ConfigMismatchError, RendezvousError } from '../errors.ts';
import { FrameError, FrameType, parseJson, type Frame } from './frame.ts';
import { parseAgreements, type Agreement } from './agreement.ts';

export interface RankAddress {
  rank: number;
  host: string;
  port: number;
  hostname: string;
  pid: number;
}

export interface Registration extends RankAddress {
  worldSize: number;
  configHash: string;
  maxFrameBytes: number;
  /** what else must agree with rank 0 (agreement.ts) */
  agreements?: Agreement[];
}

export interface WorldTable {
  job: string;
  peers: RankAddress[];
  /** the smallest maxFrameBytes of any rank: what every sender may use */
  maxFrameBytes: number;
}

/** What each phase's link accepts: the handshake, then a registration, then the table (or a refusal at any point). */
export const HANDSHAKE_TYPES = new Set<number>([
  FrameType.Hello,
  FrameType.Challenge,
  FrameType.Proof,
  FrameType.Welcome,
  FrameType.Refuse,
]);
export const REGISTER_TYPES = new Set<number>([FrameType.Register, FrameType.Refuse]);
export const TABLE_TYPES = new Set<number>([FrameType.Table, FrameType.Refuse]);

const isStr = (v: unknown, max = 1024): v is string => typeof v === 'string' && v.length <= max;
const isInt = (v: unknown, lo: number, hi: number): v is number =>
  typeof v === 'number' && Number.isInteger(v) && v >= lo && v <= hi;

export function parseRegistration(f: Frame): Registration {
  const b = parseJson(f);
  if (
    !isInt(b.rank, 0, 65535) ||
    !isInt(b.worldSize, 1, 65536) ||
    !isStr(b.host, 255) ||
    !isInt(b.port, 1, 65535) ||
    !isStr(b.hostname, 255) ||
    !isInt(b.pid, 0, 2 ** 31) ||
    !isStr(b.configHash) ||
    !isInt(b.maxFrameBytes, 1, 2 ** 31)
  ) {
    throw new FrameError('malformed registration');
  }
  return {
    rank: b.rank,
    worldSize: b.worldSize,
    host: b.host,
    port: b.port,
    hostname: b.hostname,
    pid: b.pid,
    configHash: b.configHash,
    maxFrameBytes: b.maxFrameBytes,
    agreements: parseAgreements(b.agreements),
  };
}

export function parseTable(b: Record<string, unknown>, masterDesc: string): WorldTable {
  const bad = () => new RendezvousError(`${masterDesc} sent a malformed world table`);
  if (!isStr(b.job, 64) || !isInt(b.maxFrameBytes, 1, 2 ** 31) || !Array.isArray(b.peers)) throw bad();
  const peers = b.peers.map((p: unknown, i: number) => {
    const q = p as Record<string, unknown>;
    if (
      typeof q !== 'object' ||
      q === null ||
      q.rank !== i ||
      !isStr(q.host, 255) ||
      !isInt(q.port, 1, 65535) ||
      !isStr(q.hostname, 255) ||
      !isInt(q.pid, 0, 2 ** 31)
    )
      throw bad();
    return { rank: i, host: q.host, port: q.port, hostname: q.hostname, pid: q.pid };
  });
  return { job: b.job, peers, maxFrameBytes: b.maxFrameBytes };
}

export function errorFromRefusal(body: Record<string, unknown>, masterDesc: string): Error {
  const message = isStr(body.message, 4000) ? body.message : `${masterDesc} refused this rank without a reason`;
  if (body.kind === 'config' && isInt(body.rank, 0, 65535)) return new ConfigMismatchError(message, body.rank);
  if (body.kind === 'timeout') {
    const missing = Array.isArray(body.missing) ? body.missing.filter((m): m is number => isInt(m, 0, 65535)) : [];
    return new CommTimeoutError(message, missing);
  }
  return new RendezvousError(message);
}

export function refusalBody(err: Error): Record<string, unknown> {
  if (err instanceof ConfigMismatchError) return { kind: 'config', message: err.message, rank: err.rank };
  if (err instanceof CommTimeoutError) return { kind: 'timeout', message: err.message, missing: err.missing };
  return { kind: 'rendezvous', message: err.message };
}
