/**
 * Shared-memory allreduce bandwidth: 2 ranks (worker threads), registered SharedArrayBuffer-backed
 * buffers of 1–64 MB, allreduce(sum). Each cell is the median over timed repetitions (after a
 * warm-up) of the slower rank's time for one call, entered together after a barrier. Algorithm
 * bandwidth = buffer bytes / time. Two kinds of registered buffer:
 *
 *   arena  from comm.alloc (the world's shared wasm memory): reduced in place by the SIMD kernel
 *   sab    a plain SharedArrayBuffer: chunks copied through the rank's arena scratch and back
 *
 * The ratio column compares with Open MPI's MPI_Allreduce measured on this machine (1, 16 and
 * 64 MB only; nothing interpolated).
 *
 *   node --import tsx bench/allreduce.ts [--sizes 1,2,4,8,16,32,64] [--reps 21] [--kinds arena,sab]
 *
 * The machine has 2 cores: run it once, on a quiet machine.
 */
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';
import { createShmWorld, ShmCommunicator, type ShmInit } from '../src/comm/shm/index.ts';
import { flag, median } from './args.ts';

/** Open MPI MPI_Allreduce algorithm bandwidth on this machine, GB/s, by MB. */
const OPEN_MPI: Record<number, number> = { 1: 3.9, 16: 2.7, 64: 1.9 };
const MB = 1 << 20;

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
}

function spawnSelf(data: RankJob): Worker {
  const self = new URL(import.meta.url);
  if (!self.pathname.endsWith('.ts')) return new Worker(self, { workerData: data });
  // tsx's --import hooks do not reach worker threads on Node 20: register tsx inside the worker
  const tsx = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(self.href)}); })`;
  return new Worker(code, { eval: true, workerData: data });
}

export async function main(args: string[]): Promise<void> {
  const sizesMb = (flag(args, 'sizes') ?? '1,2,4,8,16,32,64').split(',').map(Number);
  const kinds = (flag(args, 'kinds') ?? 'arena,sab').split(',');
  const reps = Number(flag(args, 'reps') ?? 21);
  const size = 2;
  const world = createShmWorld(size);
  const workers = Array.from({ length: size }, (_, rank) => {
    const w = spawnSelf({ benchAllreduce: true, init: world.rankInit(rank), sizesMb, kinds, reps });
    world.watch(w, rank);
    return w;
  });
  const results = await Promise.all(workers.map((w) => new Promise<Cell[]>((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  })));
  await Promise.all(workers.map((w) => w.terminate()));

  const bw = (kind: string, mb: number) => {
    const cells = results.map((r) => r.find((c) => c.kind === kind && c.mb === mb)!);
    const slowest = cells[0]!.times.map((_, i) => Math.max(...cells.map((c) => c.times[i]!)));
    return (mb * MB) / (median(slowest) / 1000) / 1e9;
  };
  const names: Record<string, string> = { arena: 'arena (SIMD in place)', sab: 'plain SAB (copy-through)' };
  console.log(`shm allreduce(sum), ${size} ranks (worker threads), registered buffers, median of ${reps} after warm-up`);
  console.log('algorithm bandwidth = buffer bytes / time; ratio = vs Open MPI MPI_Allreduce on this machine\n');
  const head = ['size', ...kinds.map((k) => names[k] ?? k), 'Open MPI'];
  const rows = sizesMb.map((mb) => {
    const cells = kinds.map((k) => {
      const g = bw(k, mb), ref = OPEN_MPI[mb];
      return `${g.toFixed(2).padStart(6)} GB/s${ref ? `  ${(g / ref).toFixed(2)}×` : ''}`;
    });
    return [`${mb} MB`, ...cells, OPEN_MPI[mb] ? `${OPEN_MPI[mb]!.toFixed(1)} GB/s` : ''];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cols: string[]) => cols.map((c, i) => (i === 0 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('   ');
  console.log(line(head));
  for (const r of rows) console.log(line(r));
}

async function rank(job: RankJob): Promise<void> {
  const comm = await ShmCommunicator.connect(job.init);
  const out: Cell[] = [];
  for (const kind of job.kinds) {
    for (const mb of job.sizesMb) {
      const n = (mb * MB) / 4;
      const buf = kind === 'arena' ? comm.alloc(n) : new Float32Array(new SharedArrayBuffer(n * 4));
      buf.fill(1);
      await comm.register(buf);
      // warm up (JIT tiers, caches, page faults) for at least 300 ms and 20 calls; rank 0 decides
      const flagBuf = new Float32Array(1);
      for (let i = 0, t0 = performance.now(); ; i++) {
        comm.allreduceSync(buf);
        flagBuf[0] = comm.rank === 0 && i >= 20 && performance.now() - t0 > 300 ? 1 : 0;
        comm.broadcastSync(flagBuf, 0);
        if (flagBuf[0] === 1) break;
      }
      const times: number[] = [];
      for (let i = 0; i < job.reps; i++) {
        comm.barrierSync();
        const t0 = performance.now();
        comm.allreduceSync(buf);
        times.push(performance.now() - t0);
      }
      comm.unregister(buf);
      out.push({ kind, mb, times });
    }
  }
  comm.close();
  parentPort!.postMessage(out);
}

if (!isMainThread && (workerData as RankJob | undefined)?.benchAllreduce) {
  await rank(workerData as RankJob);
} else if (isMainThread && import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main(process.argv.slice(2));
}
