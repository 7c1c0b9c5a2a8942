/**
 * Fuzzing the handshake and rendezvous messages: forged Hello/Challenge/Proof/Refuse bodies, the
 * rank's registration and the master's world table end in the documented error classes
 * (FrameError, AuthenticationError, RendezvousError, …), never a TypeError.
 */
import { test } from 'node:test';
import fc from 'fast-check';
import { authenticateAsAcceptor, authenticateAsDialer, PROTOCOL_VERSION } from '../../src/comm/tcp/auth.ts';
import { FrameType, FrameError, type Frame } from '../../src/comm/tcp/frame.ts';
import { errorFromRefusal, parseRegistration, parseTable } from '../../src/comm/tcp/rendezvous.ts';
import { AuthenticationError, CommTimeoutError, ConfigMismatchError, RendezvousError } from '../../src/comm/errors.ts';
import type { Link } from '../../src/comm/tcp/link.ts';
import { expectOnly, runs } from './helpers.ts';

class LinkClosed extends Error {}

/** A link whose inbound frames are given; what is sent is dropped. */
function fakeLink(inbound: Frame[]): Link {
  const queue = [...inbound];
  return {
    peerRank: -1,
    next: () => {
      const f = queue.shift();
      return f ? Promise.resolve(f) : Promise.reject(new LinkClosed('closed'));
    },
    sendJson: () => Promise.resolve(),
    refuse: () => {},
    destroy: () => {},
  } as unknown as Link;
}

function frame(type: number, body: unknown): Frame {
  const payload = Buffer.from(typeof body === 'string' ? body : (JSON.stringify(body) ?? 'null'));
  return { type, flags: 0, arg: 0, seq: 0, tag: 0, aux: 0, length: payload.length, payload, check: 0 };
}

/** JSON values that trip careless code: objects posing as strings or numbers, huge numbers, long strings. */
const nasty = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.constantFrom(
    { toString: 1 },
    { valueOf: 'x', toString: null },
    { __proto__: null },
    [],
    1e308,
    -0,
    2 ** 53 + 2,
    'x'.repeat(10_000),
    '0'.repeat(64),
  ),
);

/** A valid body with some fields replaced by nasty values, some dropped. */
function forge(valid: Record<string, unknown>): fc.Arbitrary<unknown> {
  const keys = Object.keys(valid);
  return fc.oneof(
    {
      weight: 4,
      arbitrary: fc
        .tuple(fc.subarray(keys), fc.dictionary(fc.constantFrom(...keys), nasty, { maxKeys: 3 }))
        .map(([kept, replaced]) => ({ ...Object.fromEntries(kept.map((k) => [k, valid[k]])), ...replaced })),
    },
    { weight: 1, arbitrary: nasty },
  );
}

const NONCE = 'ab'.repeat(32);
const KEY = Buffer.alloc(32, 7);
const HELLO = { v: PROTOCOL_VERSION, purpose: 'rendezvous', dir: 'send', rank: 1, to: 0, job: '', nonce: NONCE };
const anyType = fc.constantFrom(
  FrameType.Hello,
  FrameType.Challenge,
  FrameType.Proof,
  FrameType.Welcome,
  FrameType.Refuse,
  FrameType.Table,
);
const handshakeError = (err: unknown) =>
  err instanceof FrameError ||
  err instanceof AuthenticationError ||
  err instanceof RendezvousError ||
  err instanceof LinkClosed;

/** Awaits `p`; an error outside the documented classes fails (with its class named). */
async function expectHandshake(p: Promise<unknown>): Promise<void> {
  try {
    await p;
  } catch (err) {
    if (!handshakeError(err))
      throw new Error(`unexpected ${(err as Error)?.constructor?.name}: ${(err as Error)?.message}`, { cause: err });
  }
}

test('fuzz handshake: the acceptor refuses forged hellos and proofs with the documented errors', {
  timeout: 60_000,
}, async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.tuple(fc.constantFrom(FrameType.Hello, FrameType.Hello, FrameType.Refuse), forge(HELLO)),
      fc.tuple(anyType, forge({ proof: NONCE, message: 'm' })),
      async ([ht, hello], [pt, proof]) => {
        const link = fakeLink([frame(ht, hello), frame(pt, proof)]);
        await expectHandshake(
          authenticateAsAcceptor(link, {
            key: KEY,
            purpose: 'rendezvous',
            myRank: 0,
            job: '',
            deadlineMs: 1000,
            check: () => undefined,
          }),
        );
      },
    ),
    { ...runs(1500), timeout: 2000 },
  );
});

test('fuzz handshake: the dialer refuses forged challenges and refusals with the documented errors', {
  timeout: 60_000,
}, async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.tuple(anyType, forge({ nonce: NONCE, proof: NONCE, message: 'authentication' })),
      fc.tuple(anyType, forge({ message: 'no' })),
      async ([ct, challenge], [wt, welcome]) => {
        const link = fakeLink([frame(ct, challenge), frame(wt, welcome)]);
        await expectHandshake(
          authenticateAsDialer(link, {
            key: KEY,
            purpose: 'data',
            myRank: 1,
            peerRank: 0,
            job: 'j',
            peerDesc: 'rank 0',
            deadlineMs: 1000,
          }),
        );
      },
    ),
    { ...runs(1500), timeout: 2000 },
  );
});

const REGISTRATION = {
  rank: 1,
  worldSize: 2,
  host: '127.0.0.1',
  port: 29500,
  hostname: 'h',
  pid: 42,
  configHash: 'c',
  maxFrameBytes: 1 << 20,
};
const TABLE = {
  job: 'j',
  maxFrameBytes: 1 << 20,
  peers: [
    { rank: 0, host: 'a', port: 1, hostname: 'h', pid: 1 },
    { rank: 1, host: 'b', port: 2, hostname: 'h', pid: 2 },
  ],
};

test('fuzz rendezvous: forged registrations, world tables and refusals end in the documented errors', {
  timeout: 60_000,
}, () => {
  fc.assert(
    fc.property(
      forge(REGISTRATION),
      forge(TABLE),
      forge({ kind: 'config', message: 'm', rank: 1, missing: [1] }),
      (reg, table, refusal) => {
        expectOnly(() => parseRegistration(frame(FrameType.Register, reg)), {
          expected: (e) => e instanceof FrameError,
          maxMs: 1000,
        });
        const body = (typeof table === 'object' && table !== null && !Array.isArray(table) ? table : {}) as Record<
          string,
          unknown
        >;
        expectOnly(() => parseTable(body, 'the master'), {
          expected: (e) => e instanceof RendezvousError,
          maxMs: 1000,
        });
        const r = (typeof refusal === 'object' && refusal !== null && !Array.isArray(refusal) ? refusal : {}) as Record<
          string,
          unknown
        >;
        const err = errorFromRefusal(r, 'the master');
        if (!(err instanceof RendezvousError || err instanceof ConfigMismatchError || err instanceof CommTimeoutError))
          throw new Error(`refusal became ${err.constructor.name}`);
      },
    ),
    runs(2000),
  );
});

test('regression: a hello whose version is an object without a usable toString is a FrameError, not a TypeError', async () => {
  const link = fakeLink([frame(FrameType.Hello, { ...HELLO, v: { toString: 1 } })]);
  await expectHandshake(
    authenticateAsAcceptor(link, {
      key: KEY,
      purpose: 'rendezvous',
      myRank: 0,
      job: '',
      deadlineMs: 1000,
      check: () => undefined,
    }),
  );
});
