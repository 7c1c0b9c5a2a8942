/**
 * What the 1-bit exchange's transport tests run on every rank of a real communicator (shm threads,
 * tcp): raw words with NaN bit patterns through send/recv and allgather, and the exchange itself
 * on fixed gradients, so the result can be compared bit for bit with the in-process group's; and a
 * communicator that counts the bytes it sends (the compression bytes tests).
 */
import type { Communicator } from '../../src/comm/communicator.ts';
import { OneBitExchange } from '../../src/parallel/compression/oneBit.ts';
import { tensorPlaces } from '../../src/parallel/compression/tensors.ts';
import { randomArray } from '../util/close.ts';

/** Quiet and signalling NaNs of both signs, infinities' neighbours, and ordinary words. */
export const NAN_WORDS = [
  0x7f800001, 0xffbfffff, 0x7fbfffff, 0xff800001, 0x7fc00000, 0xffc00001, 0x7f800000, 0x00000001, 0x80000000,
  0xdeadbeef, 0x7fa5a5a5, 0xffffffff,
];

const asFloats = (words: readonly number[]) => new Float32Array(Uint32Array.from(words).buffer);
const wordsOf = (f: Float32Array) => [...new Uint32Array(f.buffer, f.byteOffset, f.length)];

/** Rank 0 sends the words to rank 1 and rank 1 back; then an allgather whose every slice holds them. */
export async function rawWords(comm: Communicator): Promise<{ echoed: number[]; gathered: number[] }> {
  const L = NAN_WORDS.length;
  const buf = comm.rank === 0 ? asFloats(NAN_WORDS) : new Float32Array(L);
  if (comm.rank === 0) {
    await comm.send(buf, 1, 7);
    buf.fill(0);
    await comm.recv(buf, 1, 8);
  } else if (comm.rank === 1) {
    await comm.recv(buf, 0, 7);
    await comm.send(buf, 0, 8);
  }
  const all = new Float32Array(L * comm.size);
  all.set(asFloats(NAN_WORDS), comm.rank * L);
  await comm.allgather(all);
  return { echoed: wordsOf(buf), gathered: wordsOf(all) };
}

/** The tensors of the exchange tests' gradient: a 64 × 40 matrix, a bias, a 3 × 700 matrix (aligned gaps between). */
export const TENSORS = [
  { name: 'a.kernel', shape: [64, 40], offset: 0 },
  { name: 'a.bias', shape: [40], offset: 2560 },
  { name: 'b.kernel', shape: [3, 700], offset: 2608 },
];
export const LENGTH = 4720;

/** Two steps of the exchange on rank-dependent gradients: every step's result. */
export async function exchangeSteps(comm: Communicator): Promise<number[][]> {
  const x = new OneBitExchange(comm, LENGTH, tensorPlaces(LENGTH, TENSORS));
  const out: number[][] = [];
  for (let step = 0; step < 2; step++) {
    const g = randomArray(LENGTH, 10 * step + comm.rank + 1);
    await x.reduce(g);
    out.push(wordsOf(g));
  }
  return out;
}

/**
 * Bytes each rank sends, counted as the transports' algorithms move them: a ring all-reduce of n
 * floats sends 2(G − 1)/G · n, an allgather (G − 1)/G · n, a send n.
 */
export function counting(comm: Communicator): Communicator & { sent: number } {
  const G = comm.size;
  const c = Object.create(comm) as Communicator & { sent: number };
  c.sent = 0;
  c.allreduce = (buf, op) => {
    c.sent += ((2 * (G - 1)) / G) * buf.length * 4;
    return comm.allreduce(buf, op);
  };
  c.allgather = (buf) => {
    c.sent += ((G - 1) / G) * buf.length * 4;
    return comm.allgather(buf);
  };
  c.send = (buf, dest, tag) => {
    c.sent += buf.length * 4;
    return comm.send(buf, dest, tag);
  };
  return c;
}
