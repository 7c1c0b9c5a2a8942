/**
 * MPI's allreduce against paratrain's TCP ring, in the same processes of one `mpirun` job: each
 * rank initialises MPI (MpiCommunicator) and also joins a TCP world (TcpCommunicator.fromEnv reads
 * Open MPI's OMPI_COMM_WORLD_* variables; MASTER_PORT is a free port chosen here). For every size
 * the transports take turns on the same plain Float32Array buffers of 1–64 MB, allreduce(sum):
 * Open MPI's blocking MPI_Allreduce (its tuned algorithm), paratrain's MPI transport
 * (MPI_Iallreduce + MPI_Wait, Open MPI's non-blocking algorithm, what training uses so that
 * gradient buckets can overlap backward) and the TCP ring. Each cell is the median over timed repetitions (after a warm-up of at least 3
 * calls and 300 ms) of the slowest rank's time for one call, all ranks entering together after a
 * barrier. Algorithm bandwidth = buffer bytes / time; ratio = paratrain TCP / MPI_Allreduce (≥ 1:
 * TCP is at least as fast).
 *
 *   npm run bench -- allreduce-mpi [--sizes 1,4,16,64] [--np 2] [--reps 9] [--chunk-kb 1024] [--mca btl=self,vader]
 *
 * MPI picks its own transport between the ranks (on one host: shared memory, Open MPI's vader
 * BTL); `--mca btl=self,tcp` forces its TCP path for a like-for-like comparison of the algorithms
 * over loopback. Ranks are not bound to cores (--bind-to none). Needs mpirun and the MPI addon
 * (npm run build:mpi). The machine has 2 cores: run it once, on a quiet machine, under the lock.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Communicator } from '../src/comm/communicator.ts';
import { loadMpiAddon, MpiCommunicator, mpiAddonPath } from '../src/comm/mpi/index.ts';
import { TcpCommunicator } from '../src/comm/tcp/index.ts';
import { flag, freePort, median } from './args.ts';

const MB = 1 << 20;
const ENV_FLAG = 'PARATRAIN_MPI_BENCH';

interface RankJob {
  outDir: string;
  sizesMb: number[];
  reps: number;
  chunkBytes: number;
  /** measure MPI_Allreduce only (no TCP world): `openMpiAllreduce` for `bench -- allreduce` */
  mpiOnly?: boolean;
}

/** mpi: MPI_Allreduce; impi: the MPI transport's MPI_Iallreduce + MPI_Wait; tcp: the TCP ring */
type Times = Record<'mpi' | 'impi' | 'tcp', Record<number, number[]>>;
type Timed = Pick<Communicator, 'rank' | 'size' | 'allreduce' | 'broadcast' | 'barrier'>;

export async function main(args: string[]): Promise<void> {
  const sizesMb = (flag(args, 'sizes') ?? '1,4,16,64').split(',').map(Number);
  const np = Number(flag(args, 'np') ?? 2);
  const reps = Number(flag(args, 'reps') ?? 9);
  const chunkBytes = Number(flag(args, 'chunk-kb') ?? 1024) * 1024;
  const mca = args.flatMap((a, i) => (args[i - 1] === '--mca' ? ['--mca', ...a.split('=')] : []));
  if (spawnSync('mpirun', ['--version']).status !== 0)
    throw new Error('mpirun not found: apt-get install openmpi-bin libopenmpi-dev, then npm run build:mpi');
  if (!mpiAddonPath())
    throw new Error('the MPI addon is not built: apt-get install libopenmpi-dev, then npm run build:mpi');

  const outDir = mkdtempSync(join(tmpdir(), 'paratrain-mpi-bench-'));
  try {
    const job: RankJob = { outDir, sizesMb, reps, chunkBytes };
    const env = {
      ...process.env,
      [ENV_FLAG]: JSON.stringify(job),
      MASTER_PORT: String(await freePort()),
      PARATRAIN_SECRET: `bench-${process.pid}-${Date.now()}-0123456789abcdef`,
    };
    const mpirunArgs = [
      ...asRoot(),
      '--oversubscribe',
      '--bind-to',
      'none',
      ...mca,
      '-x',
      ENV_FLAG,
      '-x',
      'MASTER_PORT',
      '-x',
      'PARATRAIN_SECRET',
      '-np',
      String(np),
      process.execPath,
      '--import',
      'tsx',
      fileURLToPath(import.meta.url),
    ];
    console.log(
      `MPI_Allreduce vs paratrain's MPI transport (MPI_Iallreduce) and TCP ring, allreduce(sum), ${np} processes of one mpirun job${mca.length ? ` (${mca.join(' ')})` : ''}`,
    );
    console.log(
      `median of ${reps} after warm-up (slowest rank per call); algorithm bandwidth = buffer bytes / time; TCP chunk ${chunkBytes / 1024} KiB\n`,
    );
    const child = spawn('mpirun', mpirunArgs, { env, stdio: 'inherit' });
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    if (code !== 0) throw new Error(`mpirun exited with code ${code}`);

    const ranks = Array.from(
      { length: np },
      (_, r) => JSON.parse(readFileSync(join(outDir, `rank-${r}.json`), 'utf8')) as Times,
    );
    const gbs = (kind: keyof Times, mb: number) => {
      const slowest = Array.from({ length: reps }, (_, i) => Math.max(...ranks.map((t) => t[kind][mb]![i]!)));
      return (mb * MB) / (median(slowest) / 1000) / 1e9;
    };
    const head = ['size', 'MPI_Allreduce', 'MPI_Iallreduce', 'paratrain TCP', 'TCP / MPI_Allreduce'];
    const rows = sizesMb.map((mb) => {
      const m = gbs('mpi', mb),
        i = gbs('impi', mb),
        t = gbs('tcp', mb);
      return [
        `${mb} MB`,
        `${m.toFixed(2)} GB/s`,
        `${i.toFixed(2)} GB/s`,
        `${t.toFixed(2)} GB/s`,
        `${(t / m).toFixed(2)}×`,
      ];
    });
    const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
    const line = (c: string[]) =>
      c.map((x, i) => (i === 0 ? x.padStart(widths[i]!) : x.padEnd(widths[i]!))).join('   ');
    console.log(line(head));
    for (const r of rows) console.log(line(r));
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
}

const asRoot = (): string[] => (process.getuid?.() === 0 ? ['--allow-run-as-root'] : []);

/**
 * Open MPI's MPI_Allreduce(sum) bandwidth on this machine, GB/s by MB (algorithm bandwidth of the
 * slowest of `np` ranks, median of `reps` after warm-up) from one `mpirun -np 2` job of this file
 * (each rank a Node process with the MPI addon, MPI's own transport: on one host its shared-memory
 * BTL). Not a number when mpirun or the addon is absent: `absent` says which and how to get it.
 */
export async function openMpiAllreduce(
  sizesMb: number[],
  reps: number,
  np = 2,
): Promise<{ gbs: Record<number, number> } | { absent: string }> {
  if (spawnSync('mpirun', ['--version']).status !== 0)
    return { absent: 'mpirun not found (apt-get install openmpi-bin libopenmpi-dev, then npm run build:mpi)' };
  if (!mpiAddonPath())
    return { absent: 'the MPI addon is not built (apt-get install libopenmpi-dev, then npm run build:mpi)' };
  const outDir = mkdtempSync(join(tmpdir(), 'paratrain-mpi-bench-'));
  try {
    const job: RankJob = { outDir, sizesMb, reps, chunkBytes: 0, mpiOnly: true };
    const env = { ...process.env, [ENV_FLAG]: JSON.stringify(job) };
    const args = [
      ...asRoot(),
      '--oversubscribe',
      '--bind-to',
      'none',
      '-x',
      ENV_FLAG,
      '-np',
      String(np),
      process.execPath,
      '--import',
      'tsx',
      fileURLToPath(import.meta.url),
    ];
    const child = spawn('mpirun', args, { env, stdio: ['ignore', 'inherit', 'inherit'] });
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    if (code !== 0) return { absent: `mpirun exited with code ${code}` };
    const ranks = Array.from(
      { length: np },
      (_, r) => JSON.parse(readFileSync(join(outDir, `rank-${r}.json`), 'utf8')) as Times,
    );
    const gbs: Record<number, number> = {};
    for (const mb of sizesMb) {
      const slowest = Array.from({ length: reps }, (_, i) => Math.max(...ranks.map((t) => t.mpi[mb]![i]!)));
      gbs[mb] = (mb * MB) / (median(slowest) / 1000) / 1e9;
    }
    return { gbs };
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
}

/** Times `reps` allreduce calls of `comm` on `buf` after a warm-up; rank 0 decides when it ends. */
async function measure(comm: Timed, buf: Float32Array, reps: number): Promise<number[]> {
  const stop = new Float32Array(1);
  for (let i = 0, t0 = performance.now(); ; i++) {
    await comm.allreduce(buf);
    stop[0] = comm.rank === 0 && i >= 2 && performance.now() - t0 > 300 ? 1 : 0;
    await comm.broadcast(stop, 0);
    if (stop[0] === 1) break;
  }
  const ts: number[] = [];
  for (let i = 0; i < reps; i++) {
    buf.fill(1);
    await comm.barrier();
    const t0 = performance.now();
    await comm.allreduce(buf);
    ts.push(performance.now() - t0);
  }
  if (buf[0] !== comm.size || buf[buf.length - 1] !== comm.size)
    throw new Error(`rank ${comm.rank}: wrong result ${buf[0]} (expected ${comm.size})`);
  return ts;
}

async function rankMain(job: RankJob): Promise<void> {
  const mpi = await MpiCommunicator.init();
  const tcp = job.mpiOnly ? null : await TcpCommunicator.fromEnv({ chunkBytes: job.chunkBytes, timeoutMs: 60_000 });
  // MPI_Allreduce itself (the addon's blocking call), beside the transport's MPI_Iallreduce + MPI_Wait
  const addon = loadMpiAddon()!;
  const blocking: Timed = {
    rank: mpi.rank,
    size: mpi.size,
    allreduce: async (b) => addon.allreduce(b, 0),
    broadcast: (b, root) => mpi.broadcast(b, root),
    barrier: () => mpi.barrier(),
  };
  const times: Times = { mpi: {}, impi: {}, tcp: {} };
  for (const mb of job.sizesMb) {
    const buf = new Float32Array((mb * MB) / 4).fill(1);
    times.mpi[mb] = await measure(blocking, buf, job.reps);
    if (tcp) times.impi[mb] = await measure(mpi, buf, job.reps);
    if (tcp) times.tcp[mb] = await measure(tcp, buf, job.reps);
  }
  writeFileSync(join(job.outDir, `rank-${mpi.rank}.json`), JSON.stringify(times));
  await tcp?.close();
  await mpi.close();
}

if (process.env[ENV_FLAG]) await rankMain(JSON.parse(process.env[ENV_FLAG]!) as RankJob);
