/**
 * Mutual authentication of one connection by HMAC-SHA256 challenge–response over a shared secret.
 * Both sides prove knowledge of the secret; neither ever sends it.
 *
 *   dialer → acceptor   Hello     { v, purpose, dir, rank, to, job, nonce: Nd }
 *   acceptor → dialer   Challenge { nonce: Na, proof: HMAC(K, "acceptor" | ctx | Nd | Na) }
 *   dialer → acceptor   Proof     { proof: HMAC(K, "dialer" | ctx | Nd | Na) }
 *   acceptor → dialer   Welcome   {}
 *
 * ctx binds the purpose (rendezvous or data), the direction data will flow (dir: the dialer
 * sends, or receives), both ranks and the job id, so a proof cannot be
 * replayed on another connection, role or job; nonces are 32 random bytes per side per
 * connection; proofs are compared in constant time. Either side may answer Refuse { message }
 * instead and close. The acceptor proves first, on the dialer's fresh nonce, so a dialer with
 * the wrong secret learns that the secrets differ without the acceptor revealing anything
 * reusable (the label differs from the dialer's).
 *
 * Before Welcome a connection may only carry these small frames (PRE_AUTH_MAX_FRAME bytes) and
 * must finish within the handshake deadline; anything else drops it.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { AuthenticationError, RendezvousError } from '../errors.ts';
import { FrameError, FrameType, frameTypeName, parseJson, type Frame } from './frame.ts';
import type { Link } from './link.ts';

/** checked in every Hello; 2: the data-frame checksum runs over 32 lanes (dataPath.ts) */
export const PROTOCOL_VERSION = 2;
export type Purpose = 'rendezvous' | 'data';

/** Which way data flows on a data connection, seen from the dialer. */
export type Direction = 'send' | 'recv';

interface Ctx {
  purpose: Purpose;
  dir: Direction;
  dialer: number;
  acceptor: number;
  job: string;
}

function mac(key: Buffer, role: 'acceptor' | 'dialer', ctx: Ctx, nd: string, na: string): Buffer {
  return createHmac('sha256', key)
    .update(
      `paratrain/${PROTOCOL_VERSION}|${role}|${ctx.purpose}|${ctx.dir}|${ctx.dialer}>${ctx.acceptor}|${ctx.job}|${nd}|${na}`,
    )
    .digest();
}

function proofMatches(expected: Buffer, hex: unknown): boolean {
  if (typeof hex !== 'string' || !/^[0-9a-f]{64}$/.test(hex)) return false;
  return timingSafeEqual(expected, Buffer.from(hex, 'hex'));
}

/** A peer's value for a message: JSON, shortened (String() throws on objects such as {"toString":1}). */
function show(v: unknown, max = 200): string {
  if (typeof v === 'string') return v.slice(0, max);
  try {
    return (JSON.stringify(v) ?? typeof v).slice(0, max);
  } catch {
    return typeof v;
  }
}

const isNonce = (v: unknown): v is string => typeof v === 'string' && /^[0-9a-f]{64}$/.test(v);
const isRank = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < 65536;

/** Races `p` against a deadline; on expiry destroys the link so every pending read fails. */
async function withDeadline<T>(link: Link, p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expiry = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = new FrameError(`${what} did not complete within ${ms} ms`);
      link.destroy(err);
      reject(err);
    }, ms);
  });
  try {
    return await Promise.race([p, expiry]);
  } finally {
    clearTimeout(timer);
  }
}

async function expect(link: Link, types: number[], what: string): Promise<Frame> {
  const f = await link.next();
  if (!types.includes(f.type)) throw new FrameError(`expected ${what}, got a ${frameTypeName(f.type)} frame`);
  return f;
}

export interface DialAuth {
  key: Buffer;
  purpose: Purpose;
  /** data connections: whether the dialer will send or receive data on it (default send) */
  dir?: Direction;
  myRank: number;
  peerRank: number;
  job: string;
  /** for messages: "the master (rank 0) at 10.0.0.1:29500" */
  peerDesc: string;
  deadlineMs: number;
}

/**
 * Dialer side. Throws AuthenticationError (secrets differ), RendezvousError (refused for another
 * reason, e.g. a duplicate rank) or a plain Error (connection lost, timeout).
 */
export async function authenticateAsDialer(link: Link, a: DialAuth): Promise<void> {
  const nd = randomBytes(32).toString('hex');
  const dir = a.dir ?? 'send';
  const ctx: Ctx = { purpose: a.purpose, dir, dialer: a.myRank, acceptor: a.peerRank, job: a.job };
  await withDeadline(
    link,
    (async () => {
      void link.sendJson(FrameType.Hello, {
        v: PROTOCOL_VERSION,
        purpose: a.purpose,
        dir,
        rank: a.myRank,
        to: a.peerRank,
        job: a.job,
        nonce: nd,
      });
      const ch = await expect(link, [FrameType.Challenge, FrameType.Refuse], 'a challenge');
      const chBody = parseJson(ch);
      if (ch.type === FrameType.Refuse) throw refusal(a.peerDesc, chBody);
      if (!isNonce(chBody.nonce)) throw new FrameError('challenge without a valid nonce');
      if (!proofMatches(mac(a.key, 'acceptor', ctx, nd, chBody.nonce), chBody.proof)) {
        link.refuse('authentication failed: your proof does not match our shared secret');
        throw new AuthenticationError(
          `${a.peerDesc} did not prove knowledge of the shared secret: the processes of this job ` +
            `were given different secrets (PARATRAIN_SECRET, or the secret/secretFile option) — give every rank the same one`,
        );
      }
      void link.sendJson(FrameType.Proof, { proof: mac(a.key, 'dialer', ctx, nd, chBody.nonce).toString('hex') });
      const w = await expect(link, [FrameType.Welcome, FrameType.Refuse], 'a welcome');
      if (w.type === FrameType.Refuse) throw refusal(a.peerDesc, parseJson(w));
    })(),
    a.deadlineMs,
    `authentication with ${a.peerDesc}`,
  );
  link.peerRank = a.peerRank;
}

function refusal(peerDesc: string, body: Record<string, unknown>): Error {
  const msg = typeof body.message === 'string' ? body.message.slice(0, 500) : 'no reason given';
  if (/authentication/i.test(msg))
    return new AuthenticationError(`${peerDesc} refused this rank: ${msg} — give every rank the same secret`);
  return new RendezvousError(`${peerDesc} refused this rank: ${msg}`);
}

export interface AcceptAuth {
  key: Buffer;
  purpose: Purpose;
  myRank: number;
  /** the job id dialers must present ('' during the rendezvous) */
  job: string;
  deadlineMs: number;
  /** a reason to refuse the claimed rank (out of range, duplicate …), or undefined to go on */
  check(claimedRank: number, dir: Direction): string | undefined;
}

/**
 * Acceptor side: resolves with the peer's authenticated rank. Throws (FrameError for malformed
 * traffic, AuthenticationError for a wrong proof, RendezvousError for a refused claim); the
 * caller logs it and drops the connection — it never concerns the job.
 */
export async function authenticateAsAcceptor(link: Link, a: AcceptAuth): Promise<{ rank: number; dir: Direction }> {
  const peer = await withDeadline(
    link,
    (async () => {
      const hello = await expect(link, [FrameType.Hello], 'a hello');
      const h = parseJson(hello);
      if (h.v !== PROTOCOL_VERSION) {
        link.refuse(`protocol version ${show(h.v, 40)} is not supported (this rank speaks ${PROTOCOL_VERSION})`);
        throw new FrameError(`protocol version ${show(h.v, 40)} from a paratrain of another version`);
      }
      if (
        !isRank(h.rank) ||
        !isRank(h.to) ||
        !isNonce(h.nonce) ||
        typeof h.purpose !== 'string' ||
        typeof h.job !== 'string' ||
        (h.dir !== 'send' && h.dir !== 'recv')
      ) {
        throw new FrameError('malformed hello');
      }
      const dir: Direction = h.dir;
      if (h.purpose !== a.purpose) {
        link.refuse(`this is the ${a.purpose} port of rank ${a.myRank}, not a ${h.purpose} port`);
        throw new RendezvousError(`a peer claiming rank ${h.rank} dialled this ${a.purpose} port for ${h.purpose}`);
      }
      // the peer's own view of `to` and `job` enters the proofs, so a peer with the right secret that
      // reached the wrong rank or job is told exactly that, after authentication, below
      const ctx: Ctx = { purpose: a.purpose, dir, dialer: h.rank, acceptor: h.to, job: h.job };
      const na = randomBytes(32).toString('hex');
      void link.sendJson(FrameType.Challenge, {
        nonce: na,
        proof: mac(a.key, 'acceptor', ctx, h.nonce, na).toString('hex'),
      });
      const pf = await expect(link, [FrameType.Proof, FrameType.Refuse], 'a proof');
      const body = parseJson(pf);
      if (pf.type === FrameType.Refuse) {
        throw new AuthenticationError(
          `peer claiming rank ${h.rank} refused our proof (${show(body.message)}): the secrets differ`,
          h.rank,
        );
      }
      // checked after the proof so that only authenticated peers learn why they are refused
      if (!proofMatches(mac(a.key, 'dialer', ctx, h.nonce, na), body.proof)) {
        link.refuse('authentication failed: your proof does not match our shared secret');
        throw new AuthenticationError(
          `peer claiming rank ${h.rank} failed authentication (wrong shared secret)`,
          h.rank,
        );
      }
      if (h.to !== a.myRank || h.job !== a.job) {
        const why =
          h.to !== a.myRank
            ? `you dialled rank ${h.to}, this is rank ${a.myRank}`
            : `you belong to another job (${h.job || 'none'})`;
        link.refuse(why);
        throw new RendezvousError(`rank ${h.rank} reached the wrong process: ${why}`);
      }
      const problem = a.check(h.rank, dir);
      if (problem) {
        link.refuse(problem);
        throw new RendezvousError(`refused rank ${h.rank}: ${problem}`);
      }
      void link.sendJson(FrameType.Welcome, {});
      return { rank: h.rank, dir };
    })(),
    a.deadlineMs,
    'the handshake',
  );
  link.peerRank = peer.rank;
  return peer;
}
