/**
 * The checks one MPI rank runs (from test/comm/mpi.test.ts through rank.ts): every call of the
 * Communicator against a serial float32 reference. Failures are collected, not thrown, so the
 * test can report every rank's.
 */
import { crc32 } from 'node:zlib';
import { ownedSlice } from '../../../src/comm/communicator.ts';
import type { MpiCommunicator } from '../../../src/comm/mpi/index.ts';
import { inputValue, serialSum } from '../tcp/inputs.ts';

export interface MpiRankResult {
  rank: number;
  size: number;
  /** 'main' or 'worker': the thread that initialised MPI */
  thread: string;
  failures: string[];
  /** hashes of allreduce results, compared across ranks by the test */
  hashes: Record<string, string>;
  library?: string;
  error?: string;
}

const hash = (a: Float32Array) => crc32(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)).toString(16);

/** Lengths: 1 and 2 (fewer elements than ranks), odd ones, and one over 1 MB (MPI switches algorithms by size). */
const LENGTHS = [1, 2, 7, 1001, 300007];

export async function runChecks(comm: MpiCommunicator, out: MpiRankResult): Promise<void> {
  const N = comm.size,
    r = comm.rank;
  const check = (cond: boolean, what: string) => {
    if (!cond && out.failures.length < 30) out.failures.push(what);
  };
  check(comm.library.length > 0, 'library version string is empty');

  for (const n of LENGTHS) {
    const mine = (seed: number) => Float32Array.from({ length: n }, (_, i) => inputValue(r, i, seed));
    const absSum = (i: number, seed: number) => {
      let s = 0;
      for (let k = 0; k < N; k++) s += Math.abs(Math.fround(inputValue(k, i, seed)));
      return s;
    };
    // MPI may add in another order than the serial reference: allow ~8 float32 ulps of Σ|x|
    // (1e-6 relative); with 2 ranks there is one addition, so the result must be exact.
    const close = (got: number, want: number, i: number, seed: number) =>
      N <= 2 ? Object.is(got, want) : Math.abs(got - want) <= 1e-6 * absSum(i, seed);

    for (const op of ['sum', 'mean'] as const) {
      const seed = n + (op === 'sum' ? 1 : 2);
      const buf = mine(seed);
      await comm.allreduce(buf, op);
      const ref = serialSum(N, n, seed);
      let bad = 0,
        first = -1;
      for (let i = 0; i < n; i++) {
        const want = op === 'mean' ? Math.fround(ref[i]! / N) : ref[i]!;
        if (!close(buf[i]!, want, i, seed)) {
          bad++;
          if (first < 0) first = i;
        }
      }
      check(
        bad === 0,
        `allreduce(${op}) n=${n}: ${bad} elements off the serial reference (first at ${first}: ${buf[first]} vs ${ref[first]})`,
      );
      out.hashes[`allreduce-${op}-${n}`] = hash(buf);
    }

    for (const op of ['sum', 'mean'] as const) {
      const seed = n + (op === 'sum' ? 3 : 4);
      const buf = mine(seed);
      const { start, end } = await comm.reduceScatter(buf, op);
      const own = ownedSlice(n, N, r);
      check(
        start === own.start && end === own.end,
        `reduceScatter n=${n}: returned [${start}, ${end}), owned is [${own.start}, ${own.end})`,
      );
      const ref = serialSum(N, n, seed);
      let bad = 0;
      for (let i = start; i < end; i++)
        if (!close(buf[i]!, op === 'mean' ? Math.fround(ref[i]! / N) : ref[i]!, i, seed)) bad++;
      check(bad === 0, `reduceScatter(${op}) n=${n}: ${bad} owned elements off the serial reference`);
    }

    {
      const buf = new Float32Array(n).fill(Number.NaN);
      const own = ownedSlice(n, N, r);
      for (let i = own.start; i < own.end; i++) buf[i] = inputValue(r, i, 5);
      await comm.allgather(buf);
      let bad = 0;
      for (let k = 0; k < N; k++) {
        const s = ownedSlice(n, N, k);
        for (let i = s.start; i < s.end; i++) if (!Object.is(buf[i], Math.fround(inputValue(k, i, 5)))) bad++;
      }
      check(bad === 0, `allgather n=${n}: ${bad} elements differ from their owner's`);
    }

    {
      const root = N - 1; // a non-zero root whenever N > 1
      const buf = mine(6);
      await comm.broadcast(buf, root);
      let bad = 0;
      for (let i = 0; i < n; i++) if (!Object.is(buf[i], Math.fround(inputValue(root, i, 6)))) bad++;
      check(bad === 0, `broadcast from root ${root} n=${n}: ${bad} elements differ from the root's`);
    }
  }

  // a view at a non-zero offset: only the view is touched
  {
    const whole = new Float32Array(11).fill(7);
    const view = whole.subarray(3, 8).fill(r + 1);
    await comm.allreduce(view, 'sum');
    const want = (N * (N + 1)) / 2;
    check(
      view.every((v) => v === want) && whole[2] === 7 && whole[8] === 7,
      `allreduce of a subarray: got [${Array.from(whole)}]`,
    );
  }

  await comm.barrier();

  // send/recv around the ring, both posted before either completes (MPI's rendezvous protocol
  // for a 1 MB message would deadlock two blocking sends); tags are matched, not arrival order
  {
    const right = (r + 1) % N,
      left = (r + N - 1) % N;
    const n = 262_145;
    const a = Float32Array.from({ length: n }, (_, i) => inputValue(r, i, 7));
    const b = Float32Array.from({ length: 5 }, (_, i) => inputValue(r, i, 8));
    const ga = new Float32Array(n),
      gb = new Float32Array(5);
    await Promise.all([
      comm.send(a, right, 11),
      comm.send(b, right, 12),
      comm.recv(gb, left, 12),
      comm.recv(ga, left, 11),
    ]);
    let bad = 0;
    for (let i = 0; i < n; i++) if (!Object.is(ga[i], Math.fround(inputValue(left, i, 7)))) bad++;
    for (let i = 0; i < 5; i++) if (!Object.is(gb[i], Math.fround(inputValue(left, i, 8)))) bad++;
    check(bad === 0, `send/recv from rank ${left}: ${bad} elements differ`);

    // to itself
    const self = new Float32Array(3);
    await Promise.all([comm.send(Float32Array.of(1, 2, 3), r, 13), comm.recv(self, r, 13)]);
    check(self.join() === '1,2,3', `send/recv to itself: got [${Array.from(self)}]`);

    // a message of the wrong length is a clear error naming both lengths
    const short = Float32Array.of(1, 2);
    const [, err] = await Promise.all([
      comm.send(short, right, 14),
      comm.recv(new Float32Array(4), left, 14).then(
        () => undefined,
        (e: Error) => e,
      ),
    ]);
    check(
      err?.name === 'CollectiveMismatchError' && /expected 4 floats, but the message has 2/.test(err.message),
      `recv of the wrong length: ${err ? `${err.name}: ${err.message}` : 'no error'}`,
    );
  }

  // bad arguments are refused before MPI sees them, naming the rank and the argument
  {
    const err = await comm.broadcast(new Float32Array(1), N).then(
      () => undefined,
      (e: Error) => e,
    );
    check(
      err instanceof RangeError && err.message.includes(`rank ${r}`) && err.message.includes('root'),
      `broadcast root out of range: ${err?.message ?? 'no error'}`,
    );
  }

  // while the caller computes, collectives are polled (MPI_Test per turn) instead of waited for:
  // three in flight at once give the bits the waited calls give
  {
    const n = 100_003;
    const inputs = [21, 22, 23].map((seed) => Float32Array.from({ length: n }, (_, i) => inputValue(r, i, seed)));
    const own = ownedSlice(n, N, r);
    const gather = (b: Float32Array) => b.fill(Number.NaN, 0, own.start).fill(Number.NaN, own.end);
    const waited = inputs.map((b) => b.slice());
    await comm.allreduce(waited[0]!, 'mean');
    await comm.reduceScatter(waited[1]!, 'mean');
    await comm.allgather(gather(waited[2]!));
    const polled = inputs.map((b) => b.slice());
    comm.computing(true);
    const calls = Promise.all([
      comm.allreduce(polled[0]!, 'mean'),
      comm.reduceScatter(polled[1]!, 'mean'),
      comm.allgather(gather(polled[2]!)),
    ]);
    await new Promise((resolve) => setImmediate(resolve));
    comm.computing(false);
    await calls;
    check(hash(polled[0]!) === hash(waited[0]!), 'allreduce polled while computing differs from waited');
    check(
      hash(polled[1]!.subarray(own.start, own.end)) === hash(waited[1]!.subarray(own.start, own.end)),
      'reduceScatter polled while computing differs from waited',
    );
    check(hash(polled[2]!) === hash(waited[2]!), 'allgather polled while computing differs from waited');
  }

  const stats = comm.takeStats();
  check(stats.commMs > 0 && stats.idleMs === 0 && stats.bytes > 0, `stats: ${JSON.stringify(stats)}`);
  const again = comm.takeStats();
  check(again.commMs === 0 && again.bytes === 0, `stats not reset: ${JSON.stringify(again)}`);
}
