/**
 * TCP allreduce bandwidth over loopback: 2 and 4 processes (one rank each), plain Float32Array
 * buffers of 1–64 MB, allreduce(sum) with the chunked, pipelined ring of src/comm/tcp. Each cell
 * is the median over timed repetitions (after a warm-up of at least 3 calls and 300 ms) of the
 * slowest rank's time for one call, all ranks entering together after a barrier. Algorithm
 * bandwidth = buffer bytes / time. A second table times the same number of calls back to back
 * (one barrier, then one call after another, as a training loop makes them): the slowest rank's
 * total / calls. Ranks out of step cost the first measure the most; CPU per call, on few cores,
 * the second. Both sides check one call on a buffer of ones, then run the same loops on it
 * without resetting it between calls.
 *
 * Where Debian's python3-torch is installed, the same measurement runs for Gloo's allreduce via
 * torch.distributed (same process counts, sizes, repetitions, one thread per process), and the
 * table shows paratrain / Gloo ratios (≥ 1: paratrain is at least as fast).
 *
 * A shared machine drifts by tens of percent from one minute to the next, so the two alternate:
 * each of `--rounds` rounds runs a paratrain world and then a Gloo world for every process count;
 * a cell shows the median over rounds of each, and the median of the per-round ratios.
 *
 *   npm run bench -- allreduce-tcp [--sizes 1,4,16,64] [--procs 2,4] [--reps 25] [--rounds 3] [--chunk-kb 1024] [--no-gloo]
 *
 * The machine may have few cores: with 4 processes on 2 cores both implementations share them
 * alike. Close other work while it runs.
 */
import { fork } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { TcpCommunicator } from '../src/comm/tcp/index.ts';
import { runPython, torchPython } from './torch.ts';
import { flag, freePort, median } from './args.ts';

const MB = 1 << 20;
const ENV_FLAG = 'PARATRAIN_TCP_BENCH_RANK';

interface RankJob {
  rank: number;
  worldSize: number;
  masterPort: number;
  sizesMb: number[];
  reps: number;
  chunkBytes: number;
  secret: string;
}

/** rank → parent messages */
/** one rank's times per size: each call after a barrier, and the total of the back-to-back calls */
interface RankTimes {
  times: Record<number, number[]>;
  streamMs: Record<number, number>;
}
type RankMsg =
  | { kind: 'master'; port: number }
  | ({ kind: 'times'; rank: number } & RankTimes)
  | { kind: 'error'; message: string };

/** GB/s per size: one call at a time (`call`) and back to back (`stream`). */
interface WorldResult {
  call: Record<number, number>;
  stream: Record<number, number>;
}

/** Runs one world of `worldSize` processes: GB/s of the slowest rank, per call (median) and back to back. */
async function runWorld(worldSize: number, sizesMb: number[], reps: number, chunkBytes: number): Promise<WorldResult> {
  const secret = `bench-${process.pid}-${Date.now()}-0123456789abcdef`;
  const self = fileURLToPath(import.meta.url);
  const children: ReturnType<typeof fork>[] = [];
  const results: Record<number, RankTimes> = {};
  let masterPort = 0;
  let onListening: (port: number) => void = () => {};
  const listening = new Promise<number>((resolve) => {
    onListening = resolve;
  });
  const spawnRank = (rank: number) =>
    new Promise<void>((resolve, reject) => {
      const job: RankJob = { rank, worldSize, masterPort, sizesMb, reps, chunkBytes, secret };
      const child = fork(self, [], {
        execArgv: ['--import', 'tsx'],
        env: { ...process.env, [ENV_FLAG]: JSON.stringify(job) },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      children.push(child);
      let error: string | undefined;
      child.on('message', (m: RankMsg) => {
        if (m.kind === 'master') onListening(m.port);
        else if (m.kind === 'times') results[rank] = m;
        else error = m.message;
      });
      child.on('exit', (code) => {
        if (code === 0 && !error) resolve();
        else reject(new Error(`rank ${rank} failed: ${error ?? `exit code ${code}`}`));
      });
    });
  // rank 0 first, on any free port; the others once it listens
  const ends = [spawnRank(0)];
  ends[0]!.catch(() => onListening(-1));
  masterPort = await listening;
  if (masterPort > 0) for (let r = 1; r < worldSize; r++) ends.push(spawnRank(r));
  try {
    await Promise.all(ends);
  } finally {
    for (const c of children) if (c.exitCode === null) c.kill();
  }
  const out: WorldResult = { call: {}, stream: {} };
  for (const mb of sizesMb) {
    const ranks = Object.values(results);
    const slowest = Array.from({ length: reps }, (_, i) => Math.max(...ranks.map((r) => r.times[mb]![i]!)));
    out.call[mb] = (mb * MB) / (median(slowest) / 1000) / 1e9;
    out.stream[mb] = (mb * MB) / (Math.max(...ranks.map((r) => r.streamMs[mb]!)) / reps / 1000) / 1e9;
  }
  return out;
}

const GLOO_SCRIPT = `
import os, sys, time, json, statistics, datetime
import torch, torch.distributed as dist, torch.multiprocessing as mp

def run(rank, world, port, sizes, reps, q):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group('gloo', rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
    out = {}
    flag = torch.zeros(1)
    for mb in sizes:
        t = torch.ones(mb * (1 << 20) // 4)
        dist.all_reduce(t)
        assert bool((t == world).all()), f'{mb} MB: wrong allreduce(sum) of ones'
        # warm up for at least 3 calls and 300 ms; rank 0 decides, so every rank makes the same calls
        t0 = time.perf_counter(); i = 0
        while True:
            dist.all_reduce(t); i += 1
            flag[0] = 1.0 if rank == 0 and i >= 3 and time.perf_counter() - t0 > 0.3 else 0.0
            dist.broadcast(flag, 0)
            if flag[0] == 1.0: break
        ts = []
        for _ in range(reps):
            dist.barrier()
            s = time.perf_counter(); dist.all_reduce(t); ts.append(time.perf_counter() - s)
        dist.barrier()
        s = time.perf_counter()
        for _ in range(reps):
            dist.all_reduce(t)
        out[mb] = (ts, time.perf_counter() - s)
    q.put((rank, out))
    dist.destroy_process_group()

if __name__ == '__main__':
    world, port, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[4])
    sizes = [int(x) for x in sys.argv[3].split(',')]
    ctx = mp.get_context('spawn')
    q = ctx.Queue()
    ps = [ctx.Process(target=run, args=(r, world, port, sizes, reps, q)) for r in range(world)]
    for p in ps: p.start()
    res = dict(q.get() for _ in ps)
    for p in ps: p.join()
    call, stream = {}, {}
    for mb in sizes:
        slow = [max(res[r][mb][0][i] for r in res) for i in range(reps)]
        call[mb] = mb * (1 << 20) / statistics.median(slow) / 1e9
        stream[mb] = mb * (1 << 20) / (max(res[r][mb][1] for r in res) / reps) / 1e9
    print(json.dumps({'call': call, 'stream': stream}))
`;

async function runGloo(worldSize: number, sizesMb: number[], reps: number): Promise<WorldResult> {
  const port = await freePort();
  const out = runPython(GLOO_SCRIPT, [String(worldSize), String(port), sizesMb.join(','), String(reps)]);
  const parsed = JSON.parse(out.split('\n').pop()!) as Record<keyof WorldResult, Record<string, number>>;
  const sizes = (r: Record<string, number>) => Object.fromEntries(Object.entries(r).map(([k, v]) => [Number(k), v]));
  return { call: sizes(parsed.call), stream: sizes(parsed.stream) };
}

export async function main(args: string[]): Promise<void> {
  const sizesMb = (flag(args, 'sizes') ?? '1,4,16,64').split(',').map(Number);
  const procs = (flag(args, 'procs') ?? '2,4').split(',').map(Number);
  const reps = Number(flag(args, 'reps') ?? 25);
  const rounds = Number(flag(args, 'rounds') ?? 3);
  const chunkBytes = Number(flag(args, 'chunk-kb') ?? 1024) * 1024;
  const gloo = !args.includes('--no-gloo') && torchPython() !== null;

  console.log(
    `tcp allreduce(sum) over loopback, one rank per process, slowest rank, after warm-up; per round: GB/s one call at a time (back to back)`,
  );
  console.log(
    `algorithm bandwidth = buffer bytes / time; chunk ${chunkBytes / 1024} KiB; ${rounds} round(s), medians over rounds` +
      (gloo
        ? '; Gloo = torch.distributed gloo all_reduce, same sizes, alternating with paratrain; ratio = median of per-round paratrain / Gloo'
        : '; Gloo: python3-torch not found (or --no-gloo)') +
      '\n',
  );

  type Measure = keyof WorldResult;
  type Cell = { pt: number[]; gl: number[]; ratio: number[] };
  const cells = new Map<string, Cell>();
  const cell = (m: Measure, n: number, mb: number) => {
    const k = `${m}/${n}/${mb}`;
    if (!cells.has(k)) cells.set(k, { pt: [], gl: [], ratio: [] });
    return cells.get(k)!;
  };
  const fmt = (r: WorldResult) =>
    sizesMb.map((mb) => `${mb} MB ${r.call[mb]!.toFixed(2)} (${r.stream[mb]!.toFixed(2)})`).join(', ');
  const glooFailed = new Set<number>();
  for (let round = 1; round <= rounds; round++) {
    for (const n of procs) {
      const pt = await runWorld(n, sizesMb, reps, chunkBytes);
      console.log(`  round ${round}, paratrain, ${n} processes: ${fmt(pt)} GB/s`);
      let gl: WorldResult | undefined;
      if (gloo && !glooFailed.has(n)) {
        try {
          gl = await runGloo(n, sizesMb, reps);
          console.log(`  round ${round}, Gloo, ${n} processes: ${fmt(gl)} GB/s`);
        } catch (err) {
          glooFailed.add(n);
          console.log(`  Gloo with ${n} processes failed: ${(err as Error).message}`);
        }
      }
      for (const m of ['call', 'stream'] as const) {
        for (const mb of sizesMb) {
          const c = cell(m, n, mb);
          c.pt.push(pt[m][mb]!);
          if (gl) {
            c.gl.push(gl[m][mb]!);
            c.ratio.push(pt[m][mb]! / gl[m][mb]!);
          }
        }
      }
    }
  }

  const table = (m: Measure, title: string) => {
    const head = ['size'];
    for (const n of procs)
      head.push(
        `paratrain ${n}p`,
        ...(cell(m, n, sizesMb[0]!).gl.length ? [`Gloo ${n}p`, 'ratio', 'ratio range'] : []),
      );
    const rows = sizesMb.map((mb) => {
      const row = [`${mb} MB`];
      for (const n of procs) {
        const c = cell(m, n, mb);
        row.push(`${median(c.pt).toFixed(2)} GB/s`);
        if (c.gl.length) {
          row.push(
            `${median(c.gl).toFixed(2)} GB/s`,
            `${median(c.ratio).toFixed(2)}×`,
            `${Math.min(...c.ratio).toFixed(2)}–${Math.max(...c.ratio).toFixed(2)}`,
          );
        }
      }
      return row;
    });
    const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
    const line = (c: string[]) =>
      c.map((x, i) => (i === 0 ? x.padStart(widths[i]!) : x.padEnd(widths[i]!))).join('   ');
    console.log(`\n${title}`);
    console.log(line(head));
    for (const r of rows) console.log(line(r));
  };
  table('call', `one call at a time (after a barrier), median of ${reps}:`);
  table('stream', `back to back (${reps} calls after one barrier), total / calls:`);
}

async function rankMain(job: RankJob): Promise<void> {
  const send = (m: RankMsg) => new Promise<void>((resolve) => process.send!(m, () => resolve()));
  try {
    const comm = await TcpCommunicator.connect({
      rank: job.rank,
      worldSize: job.worldSize,
      masterPort: job.masterPort,
      secret: job.secret,
      chunkBytes: job.chunkBytes,
      timeoutMs: 60_000,
      onMasterListening: ({ port }) => void send({ kind: 'master', port }),
    });
    const times: Record<number, number[]> = {};
    const streamMs: Record<number, number> = {};
    const flagBuf = new Float32Array(1);
    for (const mb of job.sizesMb) {
      const buf = new Float32Array((mb * MB) / 4).fill(1);
      await comm.allreduce(buf);
      const wrong = buf.findIndex((x) => x !== job.worldSize);
      if (wrong >= 0)
        throw new Error(
          `${mb} MB: element ${wrong} is ${buf[wrong]} after one allreduce(sum) of ones (expected ${job.worldSize})`,
        );
      // from here on the buffer is not reset, as on the Gloo side: the sums grow (to Infinity),
      // which costs the adds nothing, and no reset takes CPU from ranks still in a call
      for (let i = 0, t0 = performance.now(); ; i++) {
        await comm.allreduce(buf);
        flagBuf[0] = comm.rank === 0 && i >= 2 && performance.now() - t0 > 300 ? 1 : 0;
        await comm.broadcast(flagBuf, 0);
        if (flagBuf[0] === 1) break;
      }
      const ts: number[] = [];
      for (let i = 0; i < job.reps; i++) {
        await comm.barrier();
        const t0 = performance.now();
        await comm.allreduce(buf);
        ts.push(performance.now() - t0);
      }
      times[mb] = ts;
      await comm.barrier();
      const t0 = performance.now();
      for (let i = 0; i < job.reps; i++) await comm.allreduce(buf);
      streamMs[mb] = performance.now() - t0;
    }
    await send({ kind: 'times', rank: job.rank, times, streamMs });
    await comm.close();
  } catch (err) {
    await send({ kind: 'error', message: (err as Error).message });
    process.exitCode = 1;
  }
  process.disconnect();
}

if (process.env[ENV_FLAG]) {
  await rankMain(JSON.parse(process.env[ENV_FLAG]!) as RankJob);
} else if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main(process.argv.slice(2));
}
