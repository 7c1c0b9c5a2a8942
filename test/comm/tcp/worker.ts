/**
 * One rank of a tcp test job, as a separate process: `node --import tsx test/comm/tcp/worker.ts '<json WorkerSpec>'`.
 * Talks to the test over the IPC channel (see harness.ts): 'listening' (rank 0's rendezvous
 * port), 'ready' (data address, after connect), 'result'. Waits for 'go' when spec.waitForGo.
 */
import { crc32 } from 'node:zlib';
import { ownedSlice } from '../../../src/comm/communicator.ts';
import { TcpCommunicator, type TcpConnectOptions } from '../../../src/comm/tcp/index.ts';
import { formatStall, noteStep, setStallSink } from '../../../src/comm/stallInspector.ts';
import type { RankResult, WorkerMessage, WorkerSpec } from './harness.ts';
import { inputValue, serialSum } from './inputs.ts';

const spec = JSON.parse(process.argv[2]!) as WorkerSpec;
const logs: string[] = [];
const failures: string[] = [];
const data: Record<string, unknown> = {};

function send(m: WorkerMessage): Promise<void> {
  return new Promise((resolve) => {
    if (!process.connected) return resolve();
    process.send!(m, () => resolve());
  });
}

function check(cond: boolean, what: string): void {
  if (!cond && failures.length < 20) failures.push(what);
}

const hash = (a: Float32Array) => crc32(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)).toString(16);

let goResolve: () => void = () => {};
const go = new Promise<void>((resolve) => {
  goResolve = resolve;
});
process.on('message', (m: { type: string }) => {
  if (m.type === 'go') goResolve();
});

async function collectives(comm: TcpCommunicator): Promise<void> {
  const N = comm.size,
    r = comm.rank;
  const lengths = (spec.params.lengths as number[] | undefined) ?? [1, 7, 1000003];
  for (const n of lengths) {
    const mine = (seed: number) => Float32Array.from({ length: n }, (_, i) => inputValue(r, i, seed));
    const tol = 4e-6 * N;

    // allreduce(sum) and (mean) against the serial float32 reference
    for (const op of ['sum', 'mean'] as const) {
      const buf = mine(n + 1);
      // rank 1 comes late to 'mean': its left neighbour's frames arrive before the call
      if (op === 'mean' && r === 1) await new Promise((resolve) => setTimeout(resolve, 30));
      await comm.allreduce(buf, op);
      const ref = serialSum(N, n, n + 1);
      let bad = 0;
      for (let i = 0; i < n; i++) {
        const want = op === 'mean' ? ref[i]! / N : ref[i]!;
        if (!(Math.abs(buf[i]! - want) <= tol)) bad++;
      }
      check(bad === 0, `allreduce(${op}) n=${n}: ${bad} elements off the serial reference`);
      data[`allreduce-${op}-${n}`] = hash(buf);
    }

    // reduceScatter: the owned slice holds the sum
    {
      const buf = mine(n + 2);
      const { start, end } = await comm.reduceScatter(buf, 'sum');
      const own = ownedSlice(n, N, r);
      check(
        start === own.start && end === own.end,
        `reduceScatter n=${n}: returned [${start}, ${end}), owned is [${own.start}, ${own.end})`,
      );
      const ref = serialSum(N, n, n + 2);
      let bad = 0;
      for (let i = start; i < end; i++) if (!(Math.abs(buf[i]! - ref[i]!) <= tol)) bad++;
      check(bad === 0, `reduceScatter n=${n}: ${bad} owned elements off the reference`);
    }

    // allgather: every slice from its owner, exactly
    {
      const buf = new Float32Array(n).fill(Number.NaN);
      const own = ownedSlice(n, N, r);
      for (let i = own.start; i < own.end; i++) buf[i] = inputValue(r, i, 3);
      await comm.allgather(buf);
      let bad = 0;
      for (let k = 0; k < N; k++) {
        const s = ownedSlice(n, N, k);
        for (let i = s.start; i < s.end; i++) if (buf[i] !== Math.fround(inputValue(k, i, 3))) bad++;
      }
      check(bad === 0, `allgather n=${n}: ${bad} elements differ from their owner's`);
    }

    // broadcast from a root that varies with n
    {
      const root = n % N;
      const buf = mine(4);
      if (r === (root + 1) % N) await new Promise((resolve) => setTimeout(resolve, 30));
      await comm.broadcast(buf, root);
      let bad = 0;
      for (let i = 0; i < n; i++) if (buf[i] !== Math.fround(inputValue(root, i, 4))) bad++;
      check(bad === 0, `broadcast n=${n} root=${root}: ${bad} elements differ from the root's`);
    }

    // send/recv around the ring, and to self
    {
      const out = mine(5);
      const got = new Float32Array(n);
      await Promise.all([comm.send(out, (r + 1) % N, 7), comm.recv(got, (r - 1 + N) % N, 7)]);
      let bad = 0;
      for (let i = 0; i < n; i++) if (got[i] !== Math.fround(inputValue((r - 1 + N) % N, i, 5))) bad++;
      check(bad === 0, `send/recv n=${n}: ${bad} elements wrong`);
      const self = new Float32Array(n);
      await comm.send(out, r, 9);
      await comm.recv(self, r, 9);
      check(hash(self) === hash(out), `self send/recv n=${n} differs`);
    }
    await comm.barrier();
  }
  // two collectives in flight at once (e.g. gradient buckets), and send/recv beyond the ring
  {
    const n = 50_001;
    const a = Float32Array.from({ length: n }, (_, i) => inputValue(r, i, 11));
    const b = Float32Array.from({ length: n }, (_, i) => inputValue(r, i, 12));
    await Promise.all([comm.allreduce(a), comm.allreduce(b, 'mean')]);
    const ra = serialSum(N, n, 11),
      rb = serialSum(N, n, 12);
    let bad = 0;
    for (let i = 0; i < n; i++)
      if (!(Math.abs(a[i]! - ra[i]!) <= 4e-6 * N && Math.abs(b[i]! - rb[i]! / N) <= 4e-6)) bad++;
    check(bad === 0, `concurrent allreduces: ${bad} elements wrong`);
    data['allreduce-concurrent'] = hash(a) + hash(b);
    const to = (r + 2) % N,
      from = (r - 2 + N) % N;
    const got = new Float32Array(1000);
    await Promise.all([comm.send(a.subarray(0, 1000), to, 3), comm.recv(got, from, 3)]);
    const want = serialSum(N, 1000, 11);
    check(
      got.every((x, i) => x === want[i] || Math.abs(x - want[i]!) <= 4e-6 * N),
      'send/recv to rank+2 wrong',
    );
  }
  // a message behind a collective its receiver has not called yet: rank 1 waits for rank 0's
  // message first, which rank 0 sent after its first frames of the allreduce (they are held
  // unread on rank 1 for the native ring, and must be read on for the message)
  {
    const c = new Float32Array(40_000).fill(r + 1);
    if (r === 0) {
      const done = comm.allreduce(c);
      await comm.send(new Float32Array(10).fill(100), 1, 21);
      await done;
    } else if (r === 1) {
      const got = new Float32Array(10);
      await comm.recv(got, 0, 21);
      check(
        got.every((v) => v === 100),
        'the message sent behind an allreduce is wrong',
      );
      await comm.allreduce(c);
    } else await comm.allreduce(c);
    check(
      c.every((v) => v === (N * (N + 1)) / 2),
      'the allreduce with a message behind it is wrong',
    );
  }
  const stats = comm.takeStats();
  check(
    stats.bytes > 0 && stats.commMs > 0 && stats.idleMs >= 0 && stats.idleMs <= stats.commMs + 1,
    `implausible stats ${JSON.stringify(stats)}`,
  );
  data.stats = stats;
}

async function main(): Promise<void> {
  const t0 = Date.now();
  const opts: TcpConnectOptions = {
    rank: spec.rank,
    worldSize: spec.worldSize,
    masterPort: spec.masterPort,
    timeoutMs: 20_000,
    ...spec.options,
    log: (level, message) => {
      logs.push(`${level}: ${message}`);
    },
    onMasterListening: ({ port }) => void send({ type: 'listening', port }),
  };
  let comm: TcpCommunicator | undefined;
  // see the scenarios 'die-mid-call' and 'stall-mid-call'
  if (spec.rank === spec.params.victim) process.env.PARATRAIN_TCP_NATIVE_RING = '0';
  try {
    comm = await TcpCommunicator.connect(opts);
    await send({ type: 'ready', address: comm.address!, rank: comm.rank });
    if (spec.waitForGo) await go;
    switch (spec.scenario) {
      case 'connect':
        break;
      case 'collectives':
        await collectives(comm);
        break;
      case 'crash':
        // the crashing rank leaves without a word; the others then block on it
        if (comm.rank === spec.params.crashRank) process.exit(3);
        await comm.barrier();
        await comm.allreduce(new Float32Array(1000).fill(1));
        break;
      case 'stall-before-call':
        // the others wait for the victim's first frame at a frame boundary, not in the middle of one
        await comm.barrier();
        if (comm.rank === spec.params.victim) process.kill(process.pid, 'SIGSTOP');
        await comm.allreduce(new Float32Array(1 << 20).fill(1));
        break;
      case 'die-mid-call':
      case 'stall-mid-call': {
        // everyone is inside one large allreduce when the victim goes; the others run the native
        // ring where built, the victim the JS one so that its event loop can pull the plug mid-call
        const victim = comm.rank === spec.params.victim;
        await comm.barrier();
        if (victim) {
          setTimeout(
            () => (spec.scenario === 'die-mid-call' ? process.exit(3) : process.kill(process.pid, 'SIGSTOP')),
            5,
          );
        }
        await comm.allreduce(new Float32Array(8 << 20).fill(1));
        break;
      }
      case 'abort-mid-call': {
        // the victim aborts the job in the middle of one large allreduce and stays alive
        const victim = comm.rank === spec.params.victim;
        await comm.barrier();
        if (victim)
          setTimeout(() => {
            data.abortAt = Date.now();
            comm!.abort('the victim gave up');
          }, 5);
        try {
          await comm.allreduce(new Float32Array(spec.params.floats as number).fill(1));
        } finally {
          data.noticedAt = Date.now();
          if (victim) await new Promise((resolve) => setTimeout(resolve, spec.params.lingerMs as number));
        }
        break;
      }
      case 'stall-late-rank': {
        // the stall inspector (whereabouts.ts): rank `late` comes late to allreduce #2 and to a send
        const stalls: string[] = [];
        setStallSink((report) => stalls.push(formatStall(report)));
        const late = comm.rank === spec.params.late;
        const sleep = async () => {
          const ms = spec.params.sleepMs as number;
          // busy: the event loop cannot answer (a rank computing); otherwise it answers from its event loop
          if (spec.params.busy) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
          else await new Promise((resolve) => setTimeout(resolve, ms));
        };
        for (let step = 0; step < 3; step++) {
          noteStep(step);
          if (step === 2 && late) await sleep();
          await comm.allreduce(new Float32Array(11072).fill(1));
        }
        noteStep(3);
        const msg = new Float32Array(10);
        if (late) {
          await sleep();
          await comm.send(msg, 0, 7);
        } else if (comm.rank === 0) await comm.recv(msg, spec.params.late as number, 7);
        await comm.barrier();
        data.stalls = stalls;
        break;
      }
      case 'mismatch':
        await comm.allreduce(new Float32Array(comm.rank === 0 ? 10 : 12).fill(1));
        break;
      default:
        throw new Error(`unknown scenario ${spec.scenario}`);
    }
    await comm.close();
    await send({
      type: 'result',
      result: { rank: spec.rank, ok: failures.length === 0, failures, data, logs, elapsedMs: Date.now() - t0 },
    });
  } catch (err) {
    const e = err as Error & { missing?: number[]; rank?: number; failedRank?: number };
    const result: RankResult = {
      rank: spec.rank,
      ok: false,
      failures,
      data,
      logs,
      elapsedMs: Date.now() - t0,
      error: { name: e.name, message: e.message, missing: e.missing, rank: e.rank, failedRank: e.failedRank },
    };
    await comm?.close().catch(() => {});
    await send({ type: 'result', result });
  }
  process.disconnect();
}

await main();
