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
 * each device also crossing its own host's link. A transfer holds both links it crosses for
 * n/β (first come, first served), then arrives α later. Staleness = updates applied before a
 * push is served − the version the device last pulled (what the server computes).
 */
import { EventQueue, Fifo } from './eventQueue.ts';
import { loopbackOf, streamRate, type Network } from './costModel.ts';
import type { StragglerSampler } from './stragglers.ts';

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
  /** from the first step's start to the last device's end */
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

type Ev = { t: number; d: number; kind: 'ready' | 'pullAtServer' | 'pushAtServer' | 'exchangeAtServer' };

interface Device { step: number; pending: number; version: number; ops: ('pull' | 'compute' | 'push' | 'exchange')[]; idle: number; busyUntil: number }

/** Runs one parameter-server job to the end. */
export function simulateServer(job: ServerJob, rule: ServerRule): ServerOutcome {
  const { devices: G, hosts: P, perHost: L, net } = job;
  const n = job.paramBytes;
  const inMemory = P <= 1;
  const hostOf = (d: number) => Math.floor(d / L);
  const rate = streamRate(net.tcp), loop = loopbackOf(net);
  // a message's latency: none in memory; over loopback for the server's own host, else the link's
  const alphaOf = (d: number) => (inMemory ? 0 : hostOf(d) === 0 ? loop.alpha : net.tcp.link.alpha);
  const cpu = new Fifo(), serverIn = new Fifo(), serverOut = new Fifo();
  const up = Array.from({ length: P }, () => new Fifo()), down = Array.from({ length: P }, () => new Fifo());
  const q = new EventQueue<Ev>();
  const dev: Device[] = Array.from({ length: G }, () => ({ step: 0, pending: 0, version: 0, ops: ['pull'], idle: 0, busyUntil: 0 }));
  let applied = 0, dropped = 0;
  const staleness: number[] = [];

  /** A transfer of `bytes` over the links it crosses; returns its arrival time. */
  const transfer = (d: number, at: number, bytes: number, toServer: boolean): number => {
    const h = hostOf(d);
    if (inMemory) return at;
    if (h === 0) return at + loop.alpha + bytes / loop.beta;
    const dur = bytes / rate;
    const [a, b] = toServer ? [up[h]!, serverIn] : [serverOut, down[h]!];
    const start = Math.max(at, a.free, b.free);
    a.free = b.free = start + dur;
    dev[d]!.idle += start - at;
    return start + dur + net.tcp.link.alpha;
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
  const computeOf = (d: number, k: number) => (job.trace ? job.trace.compute[d]![k]! : job.compute * job.stragglers.factor(d, k));
  for (let d = 0; d < G; d++) q.push({ t: job.trace?.start[d] ?? 0, d, kind: 'ready' });
  for (let e = q.pop(); e; e = q.pop()) {
    const s = dev[e.d]!;
    if (e.kind === 'pullAtServer') {
      // the copy (in memory) or the start of the send: the version is the one the server has now
      // in memory the pull copies under the lock; the remote server copies the weights before sending them
      const { start, end } = serve(e.d, e.t, inMemory ? net.shm.alpha + n / net.shm.beta : n / net.shm.beta);
      s.version = applied;
      void start;
      q.push({ t: inMemory ? end : transfer(e.d, end, n, false), d: e.d, kind: 'ready' });
      continue;
    }
    if (e.kind === 'pushAtServer') {
      const stale = applied - s.version;
      const ok = rule.kind !== 'async' || rule.maxStaleness === undefined || stale <= rule.maxStaleness;
      const { end } = serve(e.d, e.t, (inMemory ? net.shm.alpha : 0) + (ok ? job.update : 0));
      if (ok) { applied++; staleness.push(stale); } else { dropped++; s.ops.unshift('pull'); }
      q.push({ t: end + alphaOf(e.d), d: e.d, kind: 'ready' });
      continue;
    }
    if (e.kind === 'exchangeAtServer') {
      const { end } = serve(e.d, e.t, (inMemory ? net.shm.alpha + 2 * n / net.shm.beta : 0) + job.elastic);
      applied++;
      q.push({ t: inMemory ? end : transfer(e.d, end, n, false), d: e.d, kind: 'ready' });
      continue;
    }
    // ready: the device takes its next operation
    if (!s.ops.length) {
      if (s.step >= stepsOf(e.d)) { s.busyUntil = e.t; continue; }
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
      q.push({ t: transfer(e.d, e.t, n, true), d: e.d, kind: 'pushAtServer' });
    } else {
      q.push({ t: transfer(e.d, e.t, n, true), d: e.d, kind: 'exchangeAtServer' });
    }
  }
  const seconds = Math.max(...dev.map((s) => s.busyUntil));
  const steps = job.steps;
  return {
    seconds,
    stepSeconds: dev.reduce((a, s, d) => a + s.busyUntil / stepsOf(d), 0) / G,
    deviceStepSeconds: dev.map((s, d) => s.busyUntil / stepsOf(d)),
    idleShare: dev.reduce((a, s) => a + s.idle / Math.max(s.busyUntil, 1e-12), 0) / G,
    // in steady state (the pull before the first step stands for step 0's): a pull every fetchEvery
    // steps, a push every pushEvery, a pull after each dropped push; an exchange is n each way
    bytesPerStep: rule.kind === 'async' ? n / rule.fetchEvery + n / rule.pushEvery + (dropped * n) / (G * steps) : (2 * n) / rule.period,
    staleness, dropped,
  };
}

/**
 * sync: devices take turns (the turn passes by a message to the server and its reply to the next
 * device), each pulling, computing and pushing alone; nothing overlaps, so the sum is exact.
 */
export function simulateSync(job: ServerJob): ServerOutcome {
  const { devices: G, hosts: P, perHost: L, net } = job;
  const n = job.paramBytes, inMemory = P <= 1;
  const a = net.tcp.link.alpha, rate = streamRate(net.tcp), loop = loopbackOf(net);
  let t = 0, work = 0;
  for (let k = 0; k < job.steps; k++) {
    for (let d = 0; d < G; d++) {
      const local = inMemory || Math.floor(d / L) === 0;
      // in memory a pull copies the weights and a push runs the optimizer on the server's (no copy)
      const pull = inMemory ? net.shm.alpha + n / net.shm.beta : local ? 2 * loop.alpha + n / loop.beta : 2 * a + n / rate;
      const push = inMemory ? net.shm.alpha : pull;
      const turn = inMemory ? net.shm.alpha : local ? 2 * loop.alpha : 2 * a;
      const c = job.compute * job.stragglers.factor(d, k);
      const own = pull + c + push + job.update;
      t += turn + own;
      work += own;
    }
  }
  return { seconds: t, stepSeconds: t / job.steps, deviceStepSeconds: new Array(G).fill(t / job.steps), idleShare: 1 - work / G / t, bytesPerStep: 2 * n, staleness: new Array(G * job.steps).fill(0), dropped: 0 };
}
