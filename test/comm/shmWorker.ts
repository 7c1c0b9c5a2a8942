/** One rank of an shm test world: runs a scenario and posts one RankResult. */
import { parentPort, workerData } from 'node:worker_threads';
import { ownedSlice } from '../../src/comm/communicator.ts';
import { subgroup } from '../../src/comm/subgroup.ts';
import { CommTimeoutError, PeerFailedError, ShmCommunicator, type ShmInit } from '../../src/comm/shm/index.ts';
import { firstBitDiff, hashBits, inputFor, serialSum, type RankResult } from './helpers.ts';

type Kind = 'plain' | 'sab' | 'arena' | 'sub' | 'wasm';

/** What the scenarios read from runWorld's params: each scenario's own fields, set by its tests. */
interface ScenarioParams {
  /** collectives: cases of lengths × buffer kinds, or one case as sizes and kinds */
  cases?: { sizes: number[]; kinds: Kind[] }[];
  sizes?: number[];
  kinds?: Kind[];
  /** collectives: ask the communicator not to use the native reduction */
  wasmOnly?: boolean;
  /** sendrecv: the message lengths (default: sizes) */
  sendSizes?: number[];
  /** barriers */
  rounds?: number;
  /** mutex */
  slot?: number;
  iters?: number;
  /** abort: how the culprit fails, which rank it is, after how long, and whether the others wait in an allreduce */
  mode?: 'throw' | 'comm' | 'timeout' | 'main';
  culprit?: number;
  delayMs?: number;
  allreduce?: boolean;
}

const { init, scenario, params, shared } = workerData as {
  init: ShmInit;
  scenario: string;
  params: ScenarioParams;
  shared: SharedArrayBuffer;
};
const comm = await ShmCommunicator.connect(init);
const { rank, size } = comm;
const failures: string[] = [];
const data: Record<string, unknown> = {};
const fail = (msg: string) => {
  if (failures.length < 20) failures.push(`rank ${rank}: ${msg}`);
};

function expectBits(what: string, got: Float32Array, want: Float32Array): void {
  const i = firstBitDiff(got, want);
  if (i >= 0) fail(`${what}: element ${i} is ${got[i]}, expected ${want[i]} (length ${got.length} vs ${want.length})`);
}

/** A buffer of n floats of the given kind (registered where the kind says so). */
async function makeBuffer(kind: Kind, n: number): Promise<Float32Array> {
  switch (kind) {
    case 'plain':
      return new Float32Array(n);
    case 'sab': {
      const b = new Float32Array(new SharedArrayBuffer(n * 4 + 4), 4, n); // byteOffset ≠ 0 on purpose
      await comm.register(b);
      return b;
    }
    case 'arena': {
      const b = comm.alloc(n);
      await comm.register(b);
      return b;
    }
    case 'wasm': {
      // a view into this rank's own shared wasm memory (like the wasm backend's buffers)
      const memory = new WebAssembly.Memory({
        initial: Math.ceil((n * 4 + 256) / 65536),
        maximum: 65536,
        shared: true,
      });
      const b = new Float32Array(memory.buffer, 100 + 4 * rank, n);
      await comm.register(b);
      return b;
    }
    case 'sub': {
      const whole = new Float32Array(new SharedArrayBuffer((n + 10) * 4));
      await comm.register(whole);
      return whole.subarray(3, 3 + n);
    }
  }
}

async function collectives(): Promise<void> {
  // cases of lengths × buffer kinds (params.cases), or one (params.sizes, params.kinds)
  const cases: { sizes: number[]; kinds: Kind[] }[] = params.cases ?? [{ sizes: params.sizes!, kinds: params.kinds! }];
  // whether the native reduction will run, as the communicator answers (params.wasmOnly: asked not to)
  data.nativeReduce = comm.useNativeReduce(!params.wasmOnly);
  const hashes: number[] = [];
  let seed = 0;
  for (const { sizes, kinds } of cases)
    for (const n of sizes) {
      seed++;
      const inputs = Array.from({ length: size }, (_, r) => inputFor(n, r, seed));
      const sum = serialSum(inputs);
      const mean = new Float32Array(n);
      for (let i = 0; i < n; i++) mean[i] = sum[i]! / size;
      const mine = ownedSlice(n, size, rank);
      for (const kind of kinds) {
        const buf = await makeBuffer(kind, n);
        const registered = comm.isRegistered(buf);
        if (registered !== (kind !== 'plain')) fail(`${kind} n=${n}: isRegistered() is ${registered}`);
        const tag = `${kind} n=${n}`;
        // allreduce sum and mean
        for (const [op, want] of [
          ['sum', sum],
          ['mean', mean],
        ] as const) {
          buf.set(inputs[rank]!);
          await comm.allreduce(buf, op);
          expectBits(`allreduce ${op} ${tag}`, buf, want);
          hashes.push(hashBits(buf));
        }
        // reduceScatter: only the owned slice is defined afterwards
        buf.set(inputs[rank]!);
        const got = await comm.reduceScatter(buf, 'sum');
        if (got.start !== mine.start || got.end !== mine.end)
          fail(`reduceScatter ${tag}: returned ${JSON.stringify(got)}, expected ${JSON.stringify(mine)}`);
        expectBits(`reduceScatter ${tag}`, buf.subarray(mine.start, mine.end), sum.subarray(mine.start, mine.end));
        // allgather: each rank contributes its owned slice of its own input
        buf.fill(-1234.5);
        buf.set(inputs[rank]!.subarray(mine.start, mine.end), mine.start);
        await comm.allgather(buf);
        const gathered = new Float32Array(n);
        for (let q = 0; q < size; q++) {
          const s = ownedSlice(n, size, q);
          gathered.set(inputs[q]!.subarray(s.start, s.end), s.start);
        }
        expectBits(`allgather ${tag}`, buf, gathered);
        // broadcast from every root
        for (let root = 0; root < size; root++) {
          if (rank === root) buf.set(inputs[rank]!);
          else buf.fill(-99);
          await comm.broadcast(buf, root);
          expectBits(`broadcast root ${root} ${tag}`, buf, inputs[root]!);
        }
        // the buffer of a different kind must not have been touched by zero-copy writes of others
      }
    }
  data.hashes = hashes;
  data.paths = comm.pathCounts();
}

async function sendrecv(): Promise<void> {
  const sizes = params.sendSizes ?? params.sizes!;
  let seed = 100;
  for (const n of sizes) {
    seed++;
    if (size === 1) {
      if (n <= 1000) {
        const out = inputFor(n, 0, seed),
          back = new Float32Array(n);
        await comm.send(out, 0, 5);
        await comm.recv(back, 0, 5);
        expectBits(`self send n=${n}`, back, out);
      }
      continue;
    }
    // ring: even ranks send first, odd ranks receive first (sends of large messages block)
    const next = (rank + 1) % size,
      prev = (rank - 1 + size) % size;
    const out = inputFor(n, rank, seed),
      got = new Float32Array(n).fill(7);
    if (rank % 2 === 0) {
      await comm.send(out, next, n % 1000);
      await comm.recv(got, prev, n % 1000);
    } else {
      await comm.recv(got, prev, n % 1000);
      await comm.send(out, next, n % 1000);
    }
    expectBits(`ring recv n=${n} from ${prev}`, got, inputFor(n, prev, seed));
    // several small messages in a row to the same peer (in order, different tags)
    if (rank === 0) for (let k = 0; k < 5; k++) await comm.send(Float32Array.of(k, n), 1, k);
    if (rank === 1) {
      for (let k = 0; k < 5; k++) {
        const m = new Float32Array(2);
        await comm.recv(m, 0, k);
        if (m[0] !== k || m[1] !== n) fail(`message ${k}: got ${m[0]}, ${m[1]}`);
      }
    }
    await comm.barrier();
  }
}

/**
 * Subgroups of the world: the even and the odd ranks, then ranks 0–2 (an odd ring) while the last
 * rank waits; integer inputs, so every summation order gives the exact sum.
 */
async function subgroups(): Promise<void> {
  const whole = (n: number, r: number, seed: number) => inputFor(n, r, seed).map((v) => Math.round(v * 64) + 0);
  const check = async (ranks: number[], n: number, seed: number) => {
    const g = subgroup(comm, ranks, 9000);
    const buf = whole(n, rank, seed);
    const want = new Float32Array(n);
    for (const r of ranks) {
      const x = whole(n, r, seed);
      for (let j = 0; j < n; j++) want[j] = want[j]! + x[j]!;
    }
    // two calls started together run in turn, like a strategy's buckets
    const half = n >> 1;
    await Promise.all([g.allreduce(buf.subarray(0, half)), g.allreduce(buf.subarray(half))]);
    expectBits(`allreduce over [${ranks}] n=${n}`, buf, want);
    const b = g.rank === 1 ? whole(n, 42, seed) : new Float32Array(n);
    await g.broadcast(b, 1);
    expectBits(`broadcast over [${ranks}] n=${n}`, b, whole(n, 42, seed));
  };
  for (const n of params.sizes!) {
    await check(rank % 2 === 0 ? [0, 2] : [1, 3], n, n + 1);
    if (rank < 3) await check([2, 0, 1], n, n + 2);
    await comm.barrier();
  }
}

async function barriers(): Promise<void> {
  const counter = new Int32Array(shared);
  const rounds = params.rounds!;
  for (let k = 1; k <= rounds; k++) {
    Atomics.add(counter, 0, 1);
    await comm.barrier();
    const c = Atomics.load(counter, 0);
    if (c < k * size) fail(`after barrier ${k}: counter ${c} < ${k * size} (someone left early)`);
    await comm.barrier();
  }
}

async function mutex(): Promise<void> {
  const counter = new Int32Array(shared);
  const m = comm.mutex(params.slot ?? 0);
  const iters = params.iters!;
  await comm.barrier();
  for (let k = 0; k < iters; k++) {
    m.lock();
    const v = counter[0]!; // deliberately non-atomic read-modify-write: the lock must protect it
    if ((k & 15) === 0) for (let spin = 0; spin < 50; spin++) counter[1] = spin;
    counter[0] = v + 1;
    m.unlock();
  }
  await comm.barrier();
  data.final = counter[0];
}

/** Everyone but the culprit blocks in a barrier (or allreduce); the culprit fails in some way. */
async function abortScenario(): Promise<void> {
  const mode = params.mode!,
    culprit = params.culprit ?? size - 1;
  const t0 = performance.now();
  if (rank === culprit && mode === 'throw') {
    // an uncaught error: the worker dies, world.watch() on the main thread aborts the job
    setTimeout(() => {
      throw new Error('boom from the culprit');
    }, params.delayMs ?? 200);
    await new Promise(() => {});
  }
  try {
    if (rank === culprit) {
      await new Promise((r) => setTimeout(r, params.delayMs ?? 200));
      if (mode === 'comm') comm.abort('culprit gave up');
      if (mode === 'timeout' || mode === 'main') {
        // stay away from the barrier until well after the others failed
        await new Promise((r) => setTimeout(r, 1000));
        data.lateCall = true;
        await comm.barrier(); // must fail fast: the job is aborted
      }
    } else if (params.allreduce) {
      const b = new Float32Array(1000);
      await comm.allreduce(b);
    } else {
      await comm.barrier();
    }
    fail('the blocking call returned although the job should have failed');
  } catch (err) {
    const e = err as Error;
    data.elapsedMs = performance.now() - t0;
    data.error = {
      name: e.name,
      message: e.message,
      failedRank: err instanceof PeerFailedError ? err.failedRank : undefined,
      missing: err instanceof CommTimeoutError ? err.missing : undefined,
    };
  }
}

async function mismatch(): Promise<void> {
  try {
    await comm.allreduce(new Float32Array(rank === 0 ? 10 : 11));
    fail('mismatched allreduce returned');
  } catch (err) {
    data.error = { name: (err as Error).name, message: (err as Error).message };
  }
}

async function registerNonShared(): Promise<void> {
  try {
    const b = rank === 1 ? new Float32Array(16) : new Float32Array(new SharedArrayBuffer(64));
    await comm.register(b);
    fail('register of a non-shared buffer returned');
  } catch (err) {
    data.error = { name: (err as Error).name, message: (err as Error).message };
  }
}

async function stats(): Promise<void> {
  comm.takeStats();
  const b = comm.alloc(1 << 16);
  await comm.register(b);
  if (rank === 0) await new Promise((r) => setTimeout(r, 150)); // the others wait for rank 0
  await comm.allreduce(b);
  data.stats = comm.takeStats();
  data.after = comm.takeStats();
}

const scenarios: Record<string, () => Promise<void>> = {
  collectives,
  sendrecv,
  subgroups,
  barriers,
  mutex,
  abort: abortScenario,
  mismatch,
  registerNonShared,
  stats,
};
try {
  // 'collectives+sendrecv': one world runs both, one after the other
  for (const s of scenario.split('+')) await scenarios[s]!();
} catch (err) {
  fail(`threw ${(err as Error).stack ?? String(err)}`);
}
comm.close();
parentPort!.postMessage({ rank, ok: failures.length === 0, failures, data } satisfies RankResult);
