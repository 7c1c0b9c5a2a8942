/**
 * Shared-memory allreduce bandwidth against Open MPI, in one run: 2 ranks (worker threads),
 * allreduce(sum) on registered buffers of 1, 4 and 16 MB. Each cell is the median over timed
 * repetitions (after a warm-up; the buffer refilled between calls, outside the timing, like the
 * MPI ranks do; each kind's calls in one block, below) of the slower rank's time for one call,
 * entered together after a barrier.
 * Algorithm bandwidth = buffer bytes / time. The kinds of buffer:
 *
 *   arena    from comm.alloc (the world's shared wasm memory): reduced in place
 *   replica  training's own buffer: the flat grads of a real Replica (one dense layer sized to the
 *            buffer) built on the backend a device thread builds (runtime/device/deviceBackend.ts), whose
 *            heap lives in the arena, registered by the hybrid strategy's onStart
 *   wasm     (where the native reduction is built) another such replica's grads, reduced by the
 *            wasm kernel (comm.useNativeReduce(false) for its calls): the two kernels side by side
 *   copy     the same replica's grads on a wasm backend with its own memory (PARATRAIN_SHM_HEAP=0):
 *            reduced where they are by the native kernel where it is
 *            built, else chunks copied through the rank's arena scratch and back
 *   sab      (optional) a plain SharedArrayBuffer, like `copy`
 *
 * The reduction kernel is the native one (native/shm, src/comm/shm/nativeReduce.ts) where it is
 * built, else wasm SIMD; the run prints which, and the `wasm` kind measures the wasm kernel in the
 * same rounds. PARATRAIN_SHM_NATIVE=0 before the command runs the wasm kernel throughout.
 *
 * The path each kind took is read from the transport's counters (comm.pathCounts()), not assumed.
 * Then `mpirun -np 2` of bench/allreduceMpi.ts measures Open MPI's MPI_Allreduce at the same sizes
 * (its own shared-memory transport), and every cell gets the ratio ours / Open MPI. Without mpirun
 * or the MPI addon the table says so and gives no ratio.
 *
 *   npm run bench -- allreduce [--sizes 1,4,16] [--reps 21] [--rounds 5] [--kinds arena,replica,wasm,copy] [--spin µs] [--no-mpi]
 *
 * Ours and Open MPI take turns for `--rounds` rounds (Open MPI's own figure can move threefold
 * between runs on a shared machine): a cell is the median over the rounds, a ratio the median of the
 * rounds' own ratios, and the rounds' figures are printed below the table. Both sides' speeds are
 * bimodal on the shared VM (Open MPI at 1 MB: 9–10 GB/s in some `mpirun` jobs and 2–3 in others,
 * with nothing of ours running), so a round's ratio can pit one side's slow spell against the
 * other's fast one; "best of rounds" divides each side's fastest round by the other's, the
 * comparison of what each reaches at its best. The default is 5 rounds, as for `bench lstm` and
 * `throughput`.
 *
 * Each kind's calls run in one block after its own warm-up, as Open MPI's do on its one buffer.
 * Kinds taking turns call by call would cycle 4 kinds × 2 ranks × 4 MB through the caches at 4 MB,
 * more than a small VM's share of the L3, while Open MPI's 2 × 4 MB stays in it: on a 2-core Zen 4
 * whole rounds then run 6–13 GB/s at 4 MB, against 49–74 with one kind alone.
 *
 * `--spin` sets how long the ranks' waits spin before sleeping (default: the transport's, as in
 * training). MPI's ranks poll without sleeping; on a loaded machine a sleeping rank's wake-up,
 * not the copy, dominates a 1 MB call, and a longer spin shows the transport without it.
 *
 * The machine is shared (2 cores): ratios within one run are what compare; absolute figures move
 * with the load (printed before and after).
 */
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { pathToFileURL } from 'node:url';
import { createShmWorld, ShmCommunicator, type PathCounts, type ShmInit } from '../src/comm/shm/index.ts';
import { loadShmNative, shmReduceDescription } from '../src/comm/shm/nativeReduce.ts';
import { createWasmBackend } from '../src/kernels/wasm/index.ts';
import type { Backend } from '../src/kernels/backend.ts';
import { parseConfig } from '../src/config/index.ts';
import { Replica } from '../src/runtime/device/replica.ts';
import { deviceBackend } from '../src/runtime/device/deviceBackend.ts';
import { createStrategy } from '../src/parallel/strategies/index.ts';
import { flag, median } from './args.ts';
import { openMpiAllreduce } from './allreduceMpi.ts';

const MB = 1 << 20;
const NAMES: Record<string, string> = {
  arena: 'arena',
  replica: 'training grads',
  wasm: 'training grads, wasm kernel',
  copy: 'grads, own memory',
  sab: 'plain SAB',
};

interface RankJob {
  benchAllreduce: true;
  init: ShmInit;
  sizesMb: number[];
  kinds: string[];
  reps: number;
}

interface Cell {
  kind: string;
  mb: number;
  /** this rank's ms per repetition */
  times: number[];
  /** the path the timed calls took, from the transport's counters */
  path: string;
}

function spawnSelf(data: RankJob): Worker {
  const self = new URL(import.meta.url);
  if (!self.pathname.endsWith('.ts')) return new Worker(self, { workerData: data });
  // tsx's --import hooks do not reach worker threads on Node 20: register tsx inside the worker
  const tsx = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(self.href)}); })`;
  return new Worker(code, { eval: true, workerData: data });
}

async function shmCells(sizesMb: number[], kinds: string[], reps: number, spinMicros?: number): Promise<Cell[][]> {
  const size = 2;
  const world = createShmWorld(size, spinMicros === undefined ? {} : { spinMicros });
  const workers = Array.from({ length: size }, (_, rank) => {
    const w = spawnSelf({ benchAllreduce: true, init: world.rankInit(rank), sizesMb, kinds, reps });
    world.watch(w, rank);
    return w;
  });
  try {
    return await Promise.all(
      workers.map(
        (w) =>
          new Promise<Cell[]>((resolve, reject) => {
            w.once('message', resolve);
            w.once('error', reject);
          }),
      ),
    );
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

export async function main(args: string[]): Promise<void> {
  const sizesMb = (flag(args, 'sizes') ?? '1,4,16').split(',').map(Number);
  const kinds = (flag(args, 'kinds') ?? (loadShmNative() ? 'arena,replica,wasm,copy' : 'arena,replica,copy')).split(
    ',',
  );
  const reps = Number(flag(args, 'reps') ?? 21);
  const spinFlag = flag(args, 'spin');
  const spin = spinFlag === undefined ? undefined : Number(spinFlag);
  for (const k of kinds)
    if (!NAMES[k]) throw new Error(`--kinds: unknown kind '${k}'; choose from ${Object.keys(NAMES).join(', ')}`);
  if (spin !== undefined && !(spin >= 0)) throw new Error(`--spin: a number of microseconds ≥ 0, got '${spinFlag}'`);
  const rounds = Number(flag(args, 'rounds') ?? 5);
  if (!(rounds >= 1)) throw new Error(`--rounds: a count ≥ 1, got '${flag(args, 'rounds')}'`);
  console.log(`CPU: ${cpuModel()}; load average ${loadavg()[0]!.toFixed(2)} at the start`);
  // rounds: ours, then Open MPI, in turn, so a change of the shared machine's speed hits both
  const ours: { gbs: (kind: string, mb: number) => number; paths: Cell[][] }[] = [];
  const mpiRounds: Record<number, number>[] = [];
  let mpiAbsent = args.includes('--no-mpi') ? 'skipped (--no-mpi)' : '';
  for (let r = 0; r < rounds; r++) {
    const results = await shmCells(sizesMb, kinds, reps, spin);
    ours.push({
      paths: results,
      gbs: (kind, mb) => {
        const cells = results.map((x) => x.find((c) => c.kind === kind && c.mb === mb)!);
        const slowest = cells[0]!.times.map((_, i) => Math.max(...cells.map((c) => c.times[i]!)));
        return (mb * MB) / (median(slowest) / 1000) / 1e9;
      },
    });
    if (mpiAbsent) continue;
    const mpi = await openMpiAllreduce(sizesMb, reps);
    if ('gbs' in mpi) mpiRounds.push(mpi.gbs);
    else mpiAbsent = mpi.absent;
  }
  console.log(`load average ${loadavg()[0]!.toFixed(2)} at the end\n`);

  const withMpi = !mpiAbsent && mpiRounds.length === rounds;
  const paths = kinds.map(
    (k) =>
      `${NAMES[k]}: ${[...new Set(ours.flatMap((o) => o.paths.flatMap((r) => r.filter((c) => c.kind === k).map((c) => c.path))))].join('/')}`,
  );
  console.log(
    `shm allreduce(sum), 2 ranks (worker threads), registered buffers, median of ${reps} after warm-up; ` +
      `waits spin ${spin === undefined ? "the transport's default (as in training: learned from the waits, 50 µs to 1 ms, when every rank has a core)" : `${spin} µs (--spin)`} before sleeping`,
  );
  console.log(`paths taken (transport counters): ${paths.join('; ')}`);
  console.log(`reduction kernel: ${shmReduceDescription()}`);
  console.log(
    withMpi
      ? `Open MPI: MPI_Allreduce(sum), one \`mpirun -np 2\` job per round, taking turns with ours for ${rounds} rounds; ` +
          "a cell is the median over the rounds, its ratio the median of the rounds' own ratios ours / Open MPI"
      : `Open MPI: not measured — ${mpiAbsent}; no ratios (${rounds} rounds of ours, medians)`,
  );
  console.log('algorithm bandwidth = buffer bytes / time\n');
  const head = ['size', ...kinds.map((k) => NAMES[k]!), 'Open MPI'];
  const rows = sizesMb.map((mb) => {
    const cells = kinds.map((k) => {
      const g = median(ours.map((o) => o.gbs(k, mb)));
      const ratio = withMpi ? median(ours.map((o, r) => o.gbs(k, mb) / mpiRounds[r]![mb]!)) : null;
      return `${g.toFixed(2).padStart(6)} GB/s${ratio !== null ? `  ${ratio.toFixed(2)}×` : ''}`;
    });
    return [`${mb} MB`, ...cells, withMpi ? `${median(mpiRounds.map((m) => m[mb]!)).toFixed(2)} GB/s` : '—'];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cols: string[]) =>
    cols.map((c, i) => (i === 0 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('   ');
  console.log(line(head));
  for (const row of rows) console.log(line(row));
  if (withMpi && rounds > 1) {
    console.log(`\nper round (GB/s), ${NAMES[kinds[0]!]} and Open MPI:`);
    for (const mb of sizesMb) {
      console.log(
        `  ${mb} MB: ${ours.map((o, r) => `${o.gbs(kinds[0]!, mb).toFixed(1)} / ${mpiRounds[r]![mb]!.toFixed(1)}`).join(' · ')}`,
      );
    }
    console.log("\nbest of rounds (each side's fastest round, GB/s), ours / Open MPI:");
    for (const mb of sizesMb) {
      const mpiBest = Math.max(...mpiRounds.map((m) => m[mb]!));
      const cells = kinds.map((k) => {
        const best = Math.max(...ours.map((o) => o.gbs(k, mb)));
        return `${NAMES[k]} ${best.toFixed(1)} / ${mpiBest.toFixed(1)} = ${(best / mpiBest).toFixed(2)}×`;
      });
      console.log(`  ${`${mb} MB`.padStart(5)}: ${cells.join(' · ')}`);
    }
  }
}

/** The CPU's model name with its family/model numbers and widest vectors (from /proc/cpuinfo where there is one). */
function cpuModel(): string {
  let info = '';
  try {
    info = readFileSync('/proc/cpuinfo', 'utf8');
  } catch {
    /* not Linux */
  }
  const field = (name: string) => new RegExp(`^${name}\\s*:\\s*(.*)$`, 'm').exec(info)?.[1]?.trim();
  const flags = ` ${field('flags') ?? ''} `;
  const isa = flags.includes(' avx512f ') ? 'AVX-512' : flags.includes(' avx2 ') ? 'AVX2' : '';
  const fm = field('cpu family') ? `family ${field('cpu family')} model ${field('model')}` : '';
  const extra = [fm, isa, `${cpus().length} logical CPUs`].filter(Boolean).join(', ');
  return `${field('model name') ?? cpus()[0]?.model ?? 'unknown'} (${extra})`;
}

/** The counter that moved between two readings: the path the calls in between took. */
function pathOf(before: PathCounts, after: PathCounts): string {
  const moved = (Object.keys(after) as (keyof PathCounts)[]).filter((k) => after[k] !== before[k]);
  return moved.join('+') || 'none';
}

/** A replica whose flat params (and grads) are exactly `floats` long: input [floats/256 - 1], dense 256. */
function replicaOf(backend: Backend, floats: number, comm: ShmCommunicator): Replica {
  const config = parseConfig(
    {
      model: { input: [floats / 256 - 1], layers: [{ dense: { units: 256 } }] },
      optimizer: { sgd: { lr: 0.01 } },
      train: { devices: 2, strategy: 'hybrid' },
    },
    'bench allreduce',
  );
  const replica = Replica.create(backend, config, { shared: true, comm }) as unknown as Replica;
  if (replica.model.grads.length !== floats)
    throw new Error(`bench: the replica has ${replica.model.grads.length} gradient floats, wanted ${floats}`);
  return replica;
}

/** Rank 0 decides when a warm-up of at least 20 calls and 300 ms is over (JIT tiers, caches, page faults). */
function warmUp(comm: ShmCommunicator, buf: Float32Array): void {
  const flagBuf = new Float32Array(1);
  for (let i = 0, t0 = performance.now(); ; i++) {
    comm.allreduceSync(buf);
    flagBuf[0] = comm.rank === 0 && i >= 20 && performance.now() - t0 > 300 ? 1 : 0;
    comm.broadcastSync(flagBuf, 0);
    if (flagBuf[0] === 1) break;
  }
}

async function rank(job: RankJob): Promise<void> {
  const comm = await ShmCommunicator.connect(job.init);
  // `copy` first: a backend with its own memory (built before this thread's heap moves to the arena)
  const own = job.kinds.includes('copy') ? await createWasmBackend() : null;
  const dev = await deviceBackend('wasm', comm);
  const out: Cell[] = [];
  for (const mb of job.sizesMb) {
    const n = (mb * MB) / 4;
    const cells: { kind: string; mb: number; times: number[]; paths: Set<string> }[] = [];
    // each kind's calls in one block after its warm-up, as Open MPI's are (see the header)
    for (const kind of job.kinds) {
      let buf: Float32Array;
      if (kind === 'replica' || kind === 'wasm' || kind === 'copy') {
        const replica = replicaOf(kind === 'copy' ? own! : dev, n, comm);
        await createStrategy(replica.config.train.strategy, { comm, ps: null }).onStart?.(replica.view());
        buf = replica.model.grads;
      } else {
        buf = kind === 'arena' ? comm.alloc(n) : new Float32Array(new SharedArrayBuffer(n * 4));
        await comm.register(buf);
      }
      buf.fill(1);
      const wasmOnly = kind === 'wasm';
      if (wasmOnly) comm.useNativeReduce(false);
      warmUp(comm, buf);
      const cell = { kind, mb, times: [] as number[], paths: new Set<string>() };
      for (let i = 0; i < job.reps; i++) {
        const before = comm.pathCounts();
        buf.fill(1);
        comm.barrierSync();
        const t0 = performance.now();
        comm.allreduceSync(buf);
        cell.times.push(performance.now() - t0);
        cell.paths.add(pathOf(before, comm.pathCounts()));
      }
      if (wasmOnly) comm.useNativeReduce(true);
      if (buf[0] !== 2 || buf[n - 1] !== 2)
        throw new Error(`rank ${comm.rank}: wrong ${kind} result ${buf[0]}, expected 2`);
      comm.unregister(buf);
      cells.push(cell);
    }
    out.push(...cells.map(({ paths, ...c }) => ({ ...c, path: [...paths].join('/') })));
  }
  comm.close();
  parentPort!.postMessage(out);
}

if (!isMainThread && (workerData as RankJob | undefined)?.benchAllreduce) {
  await rank(workerData as RankJob);
} else if (isMainThread && import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main(process.argv.slice(2));
}
