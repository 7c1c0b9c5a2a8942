/**
 * The parameter-server strategies, event by event (a closed form is wrong here: the server is a
 * queue, devices drift apart, staleness is a distribution). As paratrain implements them:
 *
 *   async (Downpour, strategies/async.ts): each device pulls the weights every fetchEvery steps,
 *     computes, and pushes its gradient accumulated over pushEvery steps; a push waits for the
 *     server's reply (staleness, applied), and a dropped one (staler than maxStaleness) is
 *     followed at once by a pull. Every device pulls once before its first step.
 *   easgd async (strategies/easgd.ts): every `period` steps an elastic exchange (the replica goes
 *     to the server and comes back moved).
 *   sync (strategies/sync.ts): one device at a time, in turn: its turn, pull, compute, push, pass.
 *
 * The server: one process's threads share it in memory under a lock (shared.ts: a pull copies the
 * weights, a push runs the optimizer, both holding the lock: one FIFO queue); with several
 * processes it is process 0's main thread (host.ts: one JavaScript thread applies the updates in
 * arrival order: a FIFO queue) behind host 0's link, which every push (in) and pull (out) crosses,
 * each device also crossing its own host's link. Transfers in flight share the links they cross
 * equally, as TCP flows do (sharedLink.ts), and arrive α after their last byte. Every transfer
 * over a host's link also crosses the server's, which has as many or more in flight, in the same
 * direction at the same rate: so each transfer moves at the server link's share, and the two
 * directions of the server's link are the only ones to model. Staleness = updates applied before
 * a push is served − the version the device last pulled (what the server computes).
 */
import { EventQueue, Fifo } from './eventQueue.ts';
import { SharedLink } from './sharedLink.ts';
import { loopbackOf, streamRate, type Network } from './costModel.ts';
import type { StragglerSampler } from './stragglers.ts';
import { CounterRng } from '../tensor/rng.ts';

/** A parameter-server job: devices, hosts, compute, sizes and the network. */
export interface ServerJob {
  devices: number;
  /** hosts (processes) and devices per host; hosts = 1: the in-memory server */
  hosts: number;
  perHost: number;
  /** steps each device runs */
  steps: number;
  /** nominal forward + backward seconds of one step */
  compute: number;
  /** bytes of the weights (= gradients) */
  paramBytes: number;
  /** the server's optimizer step, seconds */
  update: number;
  /** the server's elastic exchange arithmetic, seconds */
  elastic: number;
  net: Network;
  stragglers: StragglerSampler;
  /** when each device starts, seconds (default 0 for all; a trace has its own) */
  start?: number[];
  /**
   * Replays a run instead (trace-driven): device d starts at start[d] and its step k computes for
   * compute[d][k] seconds, for as many steps as it has; `compute` and `stragglers` are then unused.
   */
  trace?: { start: number[]; compute: number[][] };
}

/** The strategy's rule: Downpour's options, or asynchronous EASGD's period. */
export type ServerRule =
  | { kind: 'async'; fetchEvery: number; pushEvery: number; maxStaleness?: number }
  | { kind: 'easgd'; period: number };

/** What a parameter-server simulation predicts. */
export interface ServerOutcome {
  /** from the first device's start to the last device's end */
  seconds: number;
  /** mean seconds per step of a device */
  stepSeconds: number;
  /** each device's mean seconds per step (device 0 shares the server's host: faster over loopback) */
  deviceStepSeconds: number[];
  /** share of a device's time spent waiting in a queue (lock, server thread, a busy link) */
  idleShare: number;
  /** per device and step, as the parameter-server client counts them (payload of pulls and pushes) */
  bytesPerStep: number;
  /** staleness of every applied gradient (async) */
  staleness: number[];
  dropped: number;
}

type Arrival = 'ready' | 'pushAtServer' | 'exchangeAtServer';
type Ev =
  | { t: number; d: number; kind: 'ready' | 'pullAtServer' | 'pushAtServer' | 'exchangeAtServer' }
  /** a transfer over the links starts (its bytes, its direction, the event its arrival makes) */
  | { t: number; d: number; kind: 'send'; bytes: number; toServer: boolean; then: Arrival }
  /** a server link's next transfer may have ended (stale when that link changed since: `generation`) */
  | { t: number; d: number; kind: 'linkCheck'; link: number; generation: number };

interface Device {
  step: number;
  pending: number;
  version: number;
  ops: ('pull' | 'compute' | 'push' | 'exchange')[];
  idle: number;
  busyUntil: number;
}

/** Runs one parameter-server job to the end. */
export function simulateServer(job: ServerJob, rule: ServerRule): ServerOutcome {
  const { devices: G, hosts: P, perHost: L, net } = job;
  const n = job.paramBytes;
  const inMemory = P <= 1;
  const hostOf = (d: number) => Math.floor(d / L);
  const rate = streamRate(net.tcp),
    loop = loopbackOf(net);
  // a message's latency: none in memory; over loopback for the server's own host, else the link's
  const alphaOf = (d: number) => (inMemory ? 0 : hostOf(d) === 0 ? loop.alpha : net.tcp.link.alpha);
  const cpu = new Fifo();
  // the server link's two directions: pushes in (0), pulls out (1)
  const links = [new SharedLink(rate), new SharedLink(rate)];
  const q = new EventQueue<Ev>();
  const watchLink = (link: number): void => {
    const t = links[link]!.nextFinish();
    if (t < Infinity) q.push({ t, d: -1, kind: 'linkCheck', link, generation: links[link]!.generation });
  };
  const dev: Device[] = Array.from({ length: G }, () => ({
    step: 0,
    pending: 0,
    version: 0,
    ops: ['pull'],
    idle: 0,
    busyUntil: 0,
  }));
  let applied = 0,
    dropped = 0;
  const staleness: number[] = [];

  /** A transfer of `bytes` from `at`; its arrival makes the event `then`. */
  const transfer = (d: number, at: number, bytes: number, toServer: boolean, then: Arrival): void => {
    const h = hostOf(d);
    if (inMemory) q.push({ t: at, d, kind: then });
    else if (h === 0) q.push({ t: at + loop.alpha + bytes / loop.beta, d, kind: then });
    else q.push({ t: at, d, kind: 'send', bytes, toServer, then });
  };
  /** A transfer over the links starts now: it shares them with the others in flight. */
  const send = (e: Extract<Ev, { kind: 'send' }>): void => {
    const link = e.toServer ? 0 : 1;
    links[link]!.start(e.t, e.bytes, (end) => {
      // the time beyond the link's full rate was spent waiting for the other transfers
      dev[e.d]!.idle += Math.max(0, end - e.t - e.bytes / rate);
      q.push({ t: end + net.tcp.link.alpha, d: e.d, kind: e.then });
    });
    watchLink(link);
  };
  /** Service on the server's queue from `at`; returns when it ends. */
  const serve = (d: number, at: number, seconds: number): { start: number; end: number } => {
    const start = cpu.reserve(at, seconds);
    dev[d]!.idle += start - at;
    return { start, end: start + seconds };
  };

  const planStep = (s: Device): void => {
    if (rule.kind === 'async') {
      if (s.step > 0 && s.step % rule.fetchEvery === 0) s.ops.push('pull');
      s.ops.push('compute');
      if (s.pending + 1 >= rule.pushEvery) s.ops.push('push');
    } else {
      s.ops.push('compute');
      if ((s.step + 1) % rule.period === 0) s.ops.push('exchange');
    }
  };

  const stepsOf = (d: number) => job.trace?.compute[d]?.length ?? job.steps;
  const computeOf = (d: number, k: number) =>
    job.trace ? job.trace.compute[d]![k]! : job.compute * job.stragglers.factor(d, k);
  const startOf = (d: number) => job.trace?.start[d] ?? job.start?.[d] ?? 0;
  for (let d = 0; d < G; d++) q.push({ t: startOf(d), d, kind: 'ready' });
  for (let e = q.pop(); e; e = q.pop()) {
    if (e.kind === 'linkCheck') {
      const link = links[e.link]!;
      if (e.generation === link.generation) {
        link.finishUntil(e.t);
        watchLink(e.link);
      }
      continue;
    }
    if (e.kind === 'send') {
      send(e);
      continue;
    }
    const s = dev[e.d]!;
    if (e.kind === 'pullAtServer') {
      // the copy (in memory) or the start of the send: the version is the one the server has now
      // in memory the pull copies under the lock; the remote server copies the weights before sending them
      const { start, end } = serve(e.d, e.t, inMemory ? net.shm.alpha + n / net.shm.beta : n / net.shm.beta);
      s.version = applied;
      void start;
      if (inMemory) q.push({ t: end, d: e.d, kind: 'ready' });
      else transfer(e.d, end, n, false, 'ready');
      continue;
    }
    if (e.kind === 'pushAtServer') {
      const stale = applied - s.version;
      const ok = rule.kind !== 'async' || rule.maxStaleness === undefined || stale <= rule.maxStaleness;
      const { end } = serve(e.d, e.t, (inMemory ? net.shm.alpha : 0) + (ok ? job.update : 0));
      if (ok) {
        applied++;
        staleness.push(stale);
      } else {
        dropped++;
        s.ops.unshift('pull');
      }
      q.push({ t: end + alphaOf(e.d), d: e.d, kind: 'ready' });
      continue;
    }
    if (e.kind === 'exchangeAtServer') {
      const { end } = serve(e.d, e.t, (inMemory ? net.shm.alpha + (2 * n) / net.shm.beta : 0) + job.elastic);
      applied++;
      if (inMemory) q.push({ t: end, d: e.d, kind: 'ready' });
      else transfer(e.d, end, n, false, 'ready');
      continue;
    }
    // ready: the device takes its next operation
    if (!s.ops.length) {
      if (s.step >= stepsOf(e.d)) {
        s.busyUntil = e.t;
        continue;
      }
      planStep(s);
    }
    const op = s.ops.shift()!;
    if (op === 'pull') {
      q.push({ t: e.t + alphaOf(e.d), d: e.d, kind: 'pullAtServer' });
    } else if (op === 'compute') {
      const t = e.t + computeOf(e.d, s.step);
      s.step++;
      if (rule.kind === 'async') s.pending++;
      q.push({ t, d: e.d, kind: 'ready' });
    } else if (op === 'push') {
      s.pending = 0;
      transfer(e.d, e.t, n, true, 'pushAtServer');
    } else {
      transfer(e.d, e.t, n, true, 'exchangeAtServer');
    }
  }
  const seconds = Math.max(...dev.map((s) => s.busyUntil)) - Math.min(...dev.map((_, d) => startOf(d)));
  // a device's own time: from its start to its last step's end
  const busy = dev.map((s, d) => s.busyUntil - startOf(d));
  const steps = job.steps;
  return {
    seconds,
    stepSeconds: busy.reduce((a, b, d) => a + b / stepsOf(d), 0) / G,
    deviceStepSeconds: busy.map((b, d) => b / stepsOf(d)),
    idleShare: dev.reduce((a, s, d) => a + s.idle / Math.max(busy[d]!, 1e-12), 0) / G,
    // in steady state (the pull before the first step stands for step 0's): a pull every fetchEvery
    // steps, a push every pushEvery, a pull after each dropped push; an exchange is n each way
    bytesPerStep:
      rule.kind === 'async'
        ? n / rule.fetchEvery + n / rule.pushEvery + (dropped * n) / (G * steps)
        : (2 * n) / rule.period,
    staleness,
    dropped,
  };
}

/** Runs of simulateServerOverPhases with two remote devices; fewer with more (each run then samples more pairs' offsets). */
export const PHASE_SAMPLES = 32;

/**
 * The mean outcome over the devices' phases. The fluid model keeps the phases devices start with:
 * two remote devices that start together share every pull and every push (each at half rate),
 * two that start half a step apart never overlap, and nothing in the model moves them from
 * either. A real job's phases wander (uneven sharing of one TCP transfer, a late reply): in one
 * run of 3 processes on an emulated 100 Mbit/s link a remote device's step swung between 1.14 s
 * (no overlap) and 2.3 s (full overlap) from one step to the next (docs/simulator.md). So where
 * two or more devices cross the server's link, the prediction is the mean of K runs (K =
 * PHASE_SAMPLES for 2 remote devices, down to 1 from 64) whose devices start at moments spread
 * over one step alone on the link (request, pull, compute, push, update, reply): device d of run
 * k at frac(u_d + k·d / K) of it, u_d drawn once (seeded), so the offset between two devices
 * steps evenly through the step from run to run (a lattice: a fraction of random draws'
 * variance). Staleness is pooled over the runs.
 */
export function simulateServerOverPhases(job: ServerJob, rule: ServerRule, seed: number): ServerOutcome {
  const remote = job.hosts > 1 ? job.devices - job.perHost : 0;
  if (remote < 2 || job.trace) return simulateServer(job, rule);
  const n = job.paramBytes,
    rate = streamRate(job.net.tcp),
    a = job.net.tcp.link.alpha;
  const alone = 4 * a + (2 * n) / rate + n / job.net.shm.beta + job.compute + job.update;
  const rng = new CounterRng(seed, 0x9a5e);
  const u = Array.from({ length: job.devices }, () => rng.next());
  const K = Math.min(PHASE_SAMPLES, Math.ceil((2 * PHASE_SAMPLES) / remote));
  const runs = Array.from({ length: K }, (_, k) =>
    simulateServer({ ...job, start: u.map((ud, d) => alone * ((ud + (k * d) / K) % 1)) }, rule),
  );
  const meanOf = (f: (o: ServerOutcome) => number) => runs.reduce((sum, o) => sum + f(o), 0) / runs.length;
  return {
    seconds: meanOf((o) => o.seconds),
    stepSeconds: meanOf((o) => o.stepSeconds),
    deviceStepSeconds: runs[0]!.deviceStepSeconds.map((_, d) => meanOf((o) => o.deviceStepSeconds[d]!)),
    idleShare: meanOf((o) => o.idleShare),
    bytesPerStep: meanOf((o) => o.bytesPerStep),
    staleness: runs.flatMap((o) => o.staleness),
    dropped: meanOf((o) => o.dropped),
  };
}

/**
 * sync: devices take turns (the turn passes by a message to the server and its reply to the next
 * device), each pulling, computing and pushing alone; nothing overlaps, so the sum is exact.
 */
export function simulateSync(job: ServerJob): ServerOutcome {
  const { devices: G, hosts: P, perHost: L, net } = job;
  const n = job.paramBytes,
    inMemory = P <= 1;
  const a = net.tcp.link.alpha,
    rate = streamRate(net.tcp),
    loop = loopbackOf(net);
  let t = 0,
    work = 0;
  for (let k = 0; k < job.steps; k++) {
    for (let d = 0; d < G; d++) {
      const local = inMemory || Math.floor(d / L) === 0;
      // in memory a pull copies the weights and a push runs the optimizer on the server's (no copy)
      const pull = inMemory
        ? net.shm.alpha + n / net.shm.beta
        : local
          ? 2 * loop.alpha + n / loop.beta
          : 2 * a + n / rate;
      const push = inMemory ? net.shm.alpha : pull;
      const turn = inMemory ? net.shm.alpha : local ? 2 * loop.alpha : 2 * a;
      const c = job.compute * job.stragglers.factor(d, k);
      const own = pull + c + push + job.update;
      t += turn + own;
      work += own;
    }
  }
  return {
    seconds: t,
    stepSeconds: t / job.steps,
    deviceStepSeconds: new Array(G).fill(t / job.steps),
    idleShare: 1 - work / G / t,
    bytesPerStep: 2 * n,
    staleness: new Array(G * job.steps).fill(0),
    dropped: 0,
  };
}
