/**
 * Pipeline parallelism: the measured bubble (each stage's idle fraction of a step, from timestamps
 * of its real forward/backward work and of its waits) beside GPipe's (p − 1)/(m + p − 1), and the
 * peak activation bytes per stage of 1F1B against GPipe, for p = 2 and 4 stages and m = 1 … 16
 * micro-batches. Every stage is a worker thread over shared memory, running its layers
 * (`--layers` dense layers of `--width` units split evenly; fixed micro-batches of `--micro`
 * samples, so an op costs the same at every m) through parallel/pipeline/stageStep.ts.
 *
 * Op costs are made well-defined: with more stages than cores, threads that compute at once would
 * share cores and slow each other by how many happen to overlap. So each forward (backward) runs
 * its real layers and then holds its thread until a fixed time after its start — `--pace` (1.3) ×
 * the slowest of the op's solo times × max(1, stages / cores) — so it ends on time however many
 * others compute beside it; an op that overruns is counted. It holds its core busy, as computing
 * does, when every stage has a core, and sleeps when the stages outnumber the cores (holdUntil),
 * or always with `--sleep-ops`.
 * `--pace 0` measures raw compute.
 * `--pace-ms F,B` fixes the op times instead (with a small `--width` the real compute is a sliver
 * of them): the figure then measures the engine, the threads and the messages alone.
 *
 * A step's window runs from its first forward to its last backward: every wait on a message counts
 * as idle, only the bench's barrier between steps does not. Beside the bubble: `ops alone`, the
 * bubble of the step's measured op times with free messages (replayBubble; a busy machine stretches
 * ops, and a stretched op holds up its neighbour); `excess ms`, the step's time beyond what its ops'
 * times and the formula account for; `between ops ms`, the stages' time in no op (bookkeeping, or
 * a thread not running); `message ms`, a message's delivery, and `op over pace ms`, how late an op
 * ends (medians).
 *   npm run bench -- pipeline [--stages 2,4] [--m 1,2,4,8,16] [--micro 32] [--width 512] [--layers 8] [--steps 5] [--pace 1.3 | --pace-ms 10,20] [--sleep-ops]
 */
import { availableParallelism, cpus, loadavg } from 'node:os';
import { pathToFileURL } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { createShmWorld, ShmCommunicator, type ShmInit } from '../src/comm/shm/index.ts';
import { getBackend } from '../src/kernels/index.ts';
import { Tensor } from '../src/tensor/tensor.ts';
import { parseConfig } from '../src/config/index.ts';
import type { RunConfig } from '../src/config/runConfig.ts';
import { createLoss } from '../src/nn/losses.ts';
import { idealBubble, stageOps, type PipelineScheduleName } from '../src/parallel/pipeline/schedule.ts';
import { PipelineStage, planStages, unsplitLayers } from '../src/parallel/pipeline/stage.ts';
import { copiesNeeded, runStageStep, type OpTiming } from '../src/parallel/pipeline/stageStep.ts';
import { flag, median } from './args.ts';

interface Cell {
  schedule: PipelineScheduleName;
  m: number;
}
interface StageJob {
  benchPipeline: true;
  init: ShmInit;
  stages: number;
  cells: Cell[];
  micro: number;
  width: number;
  layers: number;
  steps: number;
  /** per stage, ms a forward and a backward take (0: unpaced) */
  paceMs: { forward: number; backward: number };
  /** paced ops hold their core busy (holdUntil) rather than sleep */
  busyOps: boolean;
}
interface StageReport {
  /**
   * per cell, per measured step: the start of this stage's first forward and the end of its last
   * backward, its busy ms, in absolute ms, and how far each forward and backward ran past its pace
   */
  steps: {
    start: number;
    end: number;
    busy: number;
    between: number;
    overPace: number[];
    compute: OpTiming[];
    messages: OpTiming[];
  }[][];
  peakBytes: number[];
  overruns: number;
}

const SCHEDULES: PipelineScheduleName[] = ['gpipe', '1f1b'];

const benchConfig = (width: number, layers: number): RunConfig =>
  parseConfig(
    {
      model: {
        input: [width],
        layers: Array.from({ length: layers }, () => ({ dense: { units: width, activation: 'relu' } })),
      },
      loss: 'meanSquaredError',
      train: { seed: 1 },
    },
    'bench pipeline',
  );

const sleeper = new Int32Array(new SharedArrayBuffer(4));
/**
 * Holds the thread until `until` (performance.now() ms). `busy`: by polling the clock, as an op
 * that computes keeps its core — used when every stage has a core of its own. A thread that
 * sleeps instead lets its core go idle, and on a VM waking it costs some 0.2 ms (a varying amount)
 * that no computing op pays, and in a tight schedule each late op holds up its neighbour. With
 * more stages than cores a busy op would take a core another stage computes on, so they sleep
 * (Atomics.wait).
 */
function holdUntil(until: number, busy: boolean): boolean {
  const left = until - performance.now();
  // the clock is read every 4,096 turns: each read allocates a heap number, and GC pauses would stretch the ops
  if (busy) for (let k = 1; ; k++) if ((k & 4095) === 0 && performance.now() >= until) break;
  if (!busy && left > 0) Atomics.wait(sleeper, 0, 0, left);
  return left >= 0;
}

/** Makes every forward and backward of the stage's copies last `pace` ms (when > 0), counting overruns. */
function pace(stage: PipelineStage, paceMs: StageJob['paceMs'], busy: boolean, count: { overruns: number }): void {
  if (!(paceMs.forward > 0)) return;
  for (const copy of stage.copies) {
    const forward = copy.forwardAsync.bind(copy),
      backward = copy.backwardAsync.bind(copy);
    copy.forwardAsync = async (x, ctx) => {
      const t = performance.now(),
        y = await forward(x, ctx);
      if (!holdUntil(t + paceMs.forward, busy)) count.overruns++;
      return y;
    };
    copy.backwardAsync = async (dy, onReady) => {
      const t = performance.now();
      await backward(dy, onReady);
      if (!holdUntil(t + paceMs.backward, busy)) count.overruns++;
    };
  }
}

async function runStage(job: StageJob): Promise<void> {
  const comm = await ShmCommunicator.connect(job.init);
  const backend = await getBackend('wasm');
  const s = comm.rank,
    p = job.stages;
  const c = benchConfig(job.width, job.layers);
  const ranges = planStages(unsplitLayers(backend, c.model), { stages: p });
  const most = Math.max(...job.cells.map((cell) => copiesNeeded(stageOps(cell.schedule, p, cell.m, s))));
  const stage = new PipelineStage(backend, c.model, ranges, s, most);
  stage.initialize(c.train.seed);
  const count = { overruns: 0 };
  pace(stage, job.paceMs, job.busyOps, count);
  const loss = createLoss(backend, c.loss);
  const report: StageReport = { steps: [], peakBytes: [], overruns: 0 };
  for (const cell of job.cells) {
    const ops = stageOps(cell.schedule, p, cell.m, s);
    const n = cell.m * job.micro;
    const x = new Tensor([n, job.width], backend.alloc(n * job.width).fill(0.5));
    const targets = new Float32Array(n * job.width).fill(0.1);
    const measured: StageReport['steps'][number] = [];
    let peak = 0;
    count.overruns = 0;
    for (let step = 0; step < job.steps + 1; step++) {
      const timings: OpTiming[] = [];
      stage.zeroGrads();
      await comm.barrier();
      const r = await runStageStep(
        stage,
        ops,
        {
          samples: n,
          microBatches: cell.m,
          ...(s === 0 ? { x } : {}),
          ...(s === p - 1 ? { labels: new Int32Array(n), targets } : {}),
          ctx: { training: true, seed: 1, step, sampleOffset: 0 },
          gradScale: 1 / n,
        },
        { comm, prev: s > 0 ? s - 1 : null, next: s < p - 1 ? s + 1 : null, tagBase: 0 },
        s === p - 1 ? loss : null,
        timings,
      );
      peak = Math.max(peak, r.peakActivationBytes);
      if (step === 0) continue; // the first step warms the JIT and the buffers
      const origin = performance.timeOrigin;
      const compute = timings.filter((t) => t.kind === 'forward' || t.kind === 'backward');
      const busy = compute.reduce((a, t) => a + t.end - t.start, 0);
      // the stage's time in no op at all (its bookkeeping, or its thread not running), within the window
      const inWindow = timings.filter((t) => t.start >= compute[0]!.start && t.end <= compute[compute.length - 1]!.end);
      const between =
        compute[compute.length - 1]!.end - compute[0]!.start - inWindow.reduce((a, t) => a + t.end - t.start, 0);
      const messages = timings
        .filter((t) => t.kind !== 'forward' && t.kind !== 'backward')
        .map((t) => ({ ...t, start: origin + t.start, end: origin + t.end }));
      measured.push({
        start: origin + compute[0]!.start,
        end: origin + compute[compute.length - 1]!.end,
        busy,
        between,
        compute,
        overPace: compute.map(
          (t) => t.end - t.start - (t.kind === 'forward' ? job.paceMs.forward : job.paceMs.backward),
        ),
        messages,
      });
    }
    report.steps.push(measured);
    report.peakBytes.push(peak);
    report.overruns += count.overruns;
  }
  comm.close();
  parentPort!.postMessage(report);
}

/**
 * Per message of a step, how long its receiver waited past the later of its own arrival and the
 * send's start: the time a message takes to arrive, the receiving thread's wake-up included.
 */
function messageLatencies(stages: OpTiming[][]): number[] {
  const out: number[] = [];
  for (const [s, ops] of stages.entries()) {
    for (const r of ops) {
      if (r.kind !== 'recvActivation' && r.kind !== 'recvGradient') continue;
      const from = r.kind === 'recvActivation' ? s - 1 : s + 1,
        kind = r.kind === 'recvActivation' ? 'sendActivation' : 'sendGradient';
      const send = stages[from]?.find((t) => t.kind === kind && t.micro === r.micro);
      if (send) out.push(r.end - Math.max(r.start, send.start));
    }
  }
  return out;
}

/**
 * The bubble of the step's own op times with free messages: each stage's ops replayed in its order,
 * an op starting when its stage's previous op and its input's (forward k on stage s − 1, backward k
 * on s + 1) have ended. The measured bubble less this is what messages, wake-ups and bookkeeping cost.
 */
export function replayBubble(stages: readonly (readonly OpTiming[])[]): number {
  const p = stages.length;
  const ops = stages.map((t) => t.filter((o) => o.kind === 'forward' || o.kind === 'backward'));
  const ends = ops.map(() => new Map<string, number>()),
    at = ops.map(() => 0),
    clock = ops.map(() => 0);
  let busy = 0,
    left = ops.reduce((n, o) => n + o.length, 0);
  while (left > 0) {
    let moved = false;
    for (let s = 0; s < p; s++) {
      for (let op = ops[s]![at[s]!]; op; op = ops[s]![at[s]!]) {
        const from = op.kind === 'forward' ? s - 1 : s + 1;
        const dep = from >= 0 && from < p ? ends[from]!.get(`${op.kind} ${op.micro}`) : 0;
        if (dep === undefined) break;
        const dur = op.end - op.start;
        clock[s] = Math.max(clock[s]!, dep) + dur;
        ends[s]!.set(`${op.kind} ${op.micro}`, clock[s]!);
        busy += dur;
        at[s]!++;
        left--;
        moved = true;
      }
    }
    if (!moved) throw new Error('replayBubble: the stages ran ops no schedule allows');
  }
  return 1 - busy / (p * Math.max(...clock));
}

function spawnSelf(data: StageJob): Worker {
  const self = new URL(import.meta.url);
  if (!self.pathname.endsWith('.ts')) return new Worker(self, { workerData: data });
  // tsx's --import hooks do not reach worker threads on Node 20: register tsx inside the worker
  const tsx = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(self.href)}); })`;
  return new Worker(code, { eval: true, workerData: data });
}

/** Solo ms of one stage's forward and backward on a micro-batch (this thread, nothing beside it): the slowest stage's median. */
async function soloOpMs(c: RunConfig, stages: number, micro: number): Promise<{ forward: number; backward: number }> {
  const backend = await getBackend('wasm');
  const ranges = planStages(unsplitLayers(backend, c.model), { stages });
  let forward = 0,
    backward = 0;
  for (let s = 0; s < stages; s++) {
    const stage = new PipelineStage(backend, c.model, ranges, s, 1);
    stage.initialize(1);
    const [width] = stage.inputShape as [number];
    const x = new Tensor([micro, width], backend.alloc(micro * width).fill(0.5));
    const dy = new Tensor([micro, ...stage.outputShape], backend.alloc(micro * width).fill(0.01));
    const f: number[] = [],
      b: number[] = [];
    for (let i = 0; i < 25; i++) {
      const t0 = performance.now();
      await stage.copies[0]!.forwardAsync(x, { training: true, seed: 1, step: 0, sampleOffset: 0 });
      const t1 = performance.now();
      await stage.copies[0]!.backwardAsync(dy);
      const t2 = performance.now();
      if (i < 5) continue;
      f.push(t1 - t0);
      b.push(t2 - t1);
    }
    forward = Math.max(forward, median(f));
    backward = Math.max(backward, median(b));
  }
  return { forward, backward };
}

export async function main(args: string[]): Promise<void> {
  const stagesList = (flag(args, 'stages') ?? '2,4').split(',').map(Number);
  const ms = (flag(args, 'm') ?? '1,2,4,8,16').split(',').map(Number);
  const micro = Number(flag(args, 'micro') ?? 32),
    width = Number(flag(args, 'width') ?? 512),
    layers = Number(flag(args, 'layers') ?? 8),
    steps = Number(flag(args, 'steps') ?? 5),
    paceFactor = Number(flag(args, 'pace') ?? 1.3),
    fixed = flag(args, 'pace-ms')?.split(',').map(Number),
    sleepOps = args.includes('--sleep-ops');
  if (fixed && (fixed.length !== 2 || !fixed.every((t) => t > 0)))
    throw new Error(`--pace-ms: a forward and a backward time in ms (10,20), got '${flag(args, 'pace-ms')}'`);
  const cores = availableParallelism();
  const c = benchConfig(width, layers);
  console.log(
    `pipeline bench: ${layers} × dense(${width}, relu), micro-batches of ${micro} samples, wasm backend, ` +
      `${steps} steps per cell after one warm-up; ${cores} cores (${cpus()[0]?.model ?? 'unknown CPU'}), load average ${loadavg()[0]!.toFixed(1)}`,
  );
  const cells: Cell[] = SCHEDULES.flatMap((schedule) => ms.map((m) => ({ schedule, m })));
  for (const p of stagesList) {
    const solo = await soloOpMs(c, p, micro);
    const busyOps = p <= cores && !sleepOps;
    const stretch = paceFactor * Math.max(1, p / cores);
    const paceMs = fixed
      ? { forward: fixed[0]!, backward: fixed[1]! }
      : paceFactor > 0
        ? { forward: solo.forward * stretch, backward: solo.backward * stretch }
        : { forward: 0, backward: 0 };
    console.log(
      `\np = ${p}: solo forward ${solo.forward.toFixed(2)} ms, backward ${solo.backward.toFixed(2)} ms per stage op; ` +
        (fixed
          ? `ops fixed at ${paceMs.forward} / ${paceMs.backward} ms (--pace-ms)`
          : paceFactor > 0
            ? `paced to ${paceMs.forward.toFixed(2)} / ${paceMs.backward.toFixed(2)} ms (× ${stretch.toFixed(2)})`
            : 'unpaced (raw compute)') +
        (paceMs.forward > 0
          ? busyOps
            ? ', each holding its core busy'
            : `, sleeping${sleepOps ? ' (--sleep-ops)' : ' (more stages than cores)'}`
          : ''),
    );
    const world = createShmWorld(p);
    const workers = Array.from({ length: p }, (_, s) => {
      const w = spawnSelf({
        benchPipeline: true,
        init: world.rankInit(s),
        stages: p,
        cells,
        micro,
        width,
        layers,
        steps,
        paceMs,
        busyOps,
      });
      world.watch(w, s);
      return w;
    });
    let reports: StageReport[];
    try {
      reports = await Promise.all(
        workers.map(
          (w) =>
            new Promise<StageReport>((resolve, reject) => {
              w.once('message', resolve);
              w.once('error', reject);
            }),
        ),
      );
    } finally {
      await Promise.all(workers.map((w) => w.terminate()));
    }
    console.log(
      'schedule   m   bubble measured   (p−1)/(m+p−1)   off by   ops alone   excess ms   between ops ms   message ms   op over pace ms   peak activation KiB per stage (1f1b/gpipe)',
    );
    const peaks = new Map<string, number[]>();
    for (const [i, cell] of cells.entries())
      peaks.set(
        `${cell.schedule} ${cell.m}`,
        reports.map((r) => r.peakBytes[i]!),
      );
    cells.forEach((cell, i) => {
      // per step: the window from the first forward (stage 0's) to the last backward (stage 0's); a
      // stage's idle is the window less its busy time: messages and waits count, the barrier between steps not
      const ideal = idealBubble(p, cell.m);
      const steps = reports[0]!.steps[i]!.map((_, k) => {
        const all = reports.map((r) => r.steps[i]![k]!);
        const span = Math.max(...all.map((x) => x.end)) - Math.min(...all.map((x) => x.start)),
          busy = all.reduce((a, x) => a + x.busy, 0);
        // excess: the step's time beyond what its ops' own times and the formula's bubble account for
        return {
          bubble: 1 - busy / (p * span),
          replay: replayBubble(all.map((x) => x.compute)),
          excess: span - busy / p / (1 - ideal),
          between: all.reduce((a, x) => a + x.between, 0),
        };
      });
      const measured = median(steps.map((x) => x.bubble)),
        replay = median(steps.map((x) => x.replay)),
        excess = median(steps.map((x) => x.excess)),
        between = median(steps.map((x) => x.between));
      const latency = median(
        reports[0]!.steps[i]!.flatMap((_, k) => messageLatencies(reports.map((r) => r.steps[i]![k]!.messages))),
      );
      const over = paceMs.forward > 0 ? median(reports.flatMap((r) => r.steps[i]!.flatMap((x) => x.overPace))) : NaN;
      const kib = peaks.get(`${cell.schedule} ${cell.m}`)!.map((b) => (b / 1024).toFixed(0));
      const gpipe = peaks.get(`gpipe ${cell.m}`)!;
      const ratio =
        cell.schedule === '1f1b'
          ? `  (${peaks
              .get(`1f1b ${cell.m}`)!
              .map((b, s) => (b / gpipe[s]!).toFixed(2))
              .join(' ')}; p/m = ${Math.min(1, p / cell.m).toFixed(2)})`
          : '';
      console.log(
        `${cell.schedule.padEnd(8)} ${String(cell.m).padStart(3)}   ${measured.toFixed(3).padStart(15)}   ${ideal.toFixed(3).padStart(13)}   ${(ideal > 0 ? `${(((measured - ideal) / ideal) * 100).toFixed(1)}%` : '-').padStart(6)}   ${replay.toFixed(3).padStart(9)}   ${excess.toFixed(2).padStart(9)}   ${between.toFixed(2).padStart(14)}   ${(Number.isFinite(latency) ? latency.toFixed(2) : '-').padStart(10)}   ${(Number.isFinite(over) ? over.toFixed(3) : '-').padStart(15)}   ${kib.join(' ')}${ratio}`,
      );
    });
    const overruns = reports.reduce((a, r) => a + r.overruns, 0);
    if (paceMs.forward > 0) console.log(`ops that overran their pace: ${overruns}`);
  }
}

if (!isMainThread && (workerData as StageJob | undefined)?.benchPipeline) {
  await runStage(workerData as StageJob);
} else if (isMainThread && import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main(process.argv.slice(2));
}
