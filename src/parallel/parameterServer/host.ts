import type { Communicator } from '../../comm/communicator.ts';
import type { Optimizer } from '../../optim/optimizer.ts';
import { PeerFailedError } from '../../comm/errors.ts';
import { PsHeader, PsOp, PsTag, STILL_WAITING } from './protocol.ts';
import { allFinite } from '../nonFinite.ts';

export interface ServeOptions {
  /**
   * A device whose link is lost (its process died, or its thread aborted) is dropped and the others
   * are served on (async, asynchronous EASGD; `comm` must then isolate lost peers, TcpConnectOptions.onPeerLost);
   * otherwise its loss fails the server.
   */
  survivesLostDevices?: boolean;
  /** told of each device dropped: its index, the step it last named, why */
  onDeviceLost?: (device: number, step: number, reason: string) => void;
  /** the version to count on from (a resumed server: the updates its checkpoint set had applied) */
  version?: number;
  /**
   * hands over the server's own words for a device's stall report (each device's last step, whose
   * turn it is) and whom it waits for before answering rank p (a FINISH: the devices not done; a
   * turn: the device holding it)
   */
  describe?: (words: () => string, awaiting: (p: number) => number[]) => void;
  /** told the seconds of each push's work here (the check for NaN/Inf and the optimizer step): the simulator's server time */
  onUpdate?: (seconds: number) => void;
  /**
   * A device waiting for the others (FINISH) or for its turn (WAIT_TURN) hears "still waiting"
   * this often, so that a device done long before the rest (the one beside the server finishes
   * first) never waits for data longer than its timeout; half the devices' receive timeout, so
   * their stall reports still come first. Default: never (one reply when the wait ends).
   */
  keepAliveMs?: number;
}

/** Adds a waiter to `waiters`: resolves true when it is called, false after `ms` (never with no ms). */
function wokenWithin(waiters: (() => void)[], ms: number | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = ms ? setTimeout(() => resolve(false), ms) : undefined;
    waiters.push(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/**
 * Serves the parameter server to every other rank of `comm` (rank 0 is the server; see
 * protocol.ts) until each has said BYE. One loop per device; JavaScript runs one
 * request's update at a time, so every update is atomic without a lock, and a gradient is applied
 * the moment it has arrived (Downpour). Resolves when all devices are done; rejects on the first
 * transport failure (the communicator then aborts the job on every rank), or drops the device (see
 * ServeOptions.survivesLostDevices).
 */
export async function serveParameterServer(
  comm: Communicator,
  params: Float32Array,
  optimizer: Optimizer,
  o: ServeOptions = {},
): Promise<void> {
  let version = o.version ?? 0,
    turn = 0;
  const turnWaiters: (() => void)[] = [];
  const wakeTurnWaiters = () => {
    for (const w of turnWaiters.splice(0)) w();
  };
  // devices done (finished or dropped), and the FINISH requests waiting for the rest
  const done = new Set<number>();
  const finishWaiters: (() => void)[] = [];
  const markDone = (device: number) => {
    done.add(device);
    if (done.size >= comm.size - 1) for (const w of finishWaiters.splice(0)) w();
  };
  const lastStep = new Array<number>(comm.size).fill(0);
  let turnOf = 0;
  // what each device's request in progress waits for (a stall report names those devices)
  const waitingIn = new Array<'finish' | 'turn' | null>(comm.size).fill(null);
  const awaiting = (p: number): number[] => {
    if (waitingIn[p] === 'finish')
      return Array.from({ length: comm.size - 1 }, (_, d) => d + 1).filter((q) => !done.has(q));
    if (waitingIn[p] === 'turn' && turnOf) return [(turn % turnOf) + 1];
    return [];
  };
  o.describe?.(
    () =>
      `serving${turnOf ? `, the turn is device ${turn % turnOf}'s` : ''}; devices last asked at steps ` +
      lastStep
        .slice(1)
        .map((s, d) => `${d}: ${done.has(d + 1) ? 'done' : s}`)
        .join(', '),
    awaiting,
  );
  const serve = async (device: number) => {
    const req = new PsHeader(),
      reply = new PsHeader();
    const buf = new Float32Array(params.length);
    for (;;) {
      await comm.recv(req.wire, device, PsTag.Request);
      const [op, a, b, c, step] = req.values as unknown as [number, number, number, number, number];
      lastStep[device] = step;
      switch (op) {
        case PsOp.Pull:
          // a copy taken before the first await: the transport sends without copying, and while a slow
          // link drains the weights another device's push would change them under the send (a torn
          // pull, caught by the frame's checksum on an emulated 100 Mbit/s link)
          buf.set(params);
          await comm.send(reply.set(version).wire, device, PsTag.Reply);
          await comm.send(buf, device, PsTag.Data);
          break;
        case PsOp.Push: {
          await comm.recv(buf, device, PsTag.Data);
          const t0 = performance.now();
          const staleness = version - a;
          // devices do not push NaN/Inf; the server never applies one either
          const applied = !(c >= 0 && staleness > c) && allFinite(buf);
          if (applied) {
            optimizer.stepCount = version;
            optimizer.step(params, buf, b);
            version++;
          }
          o.onUpdate?.((performance.now() - t0) / 1000);
          await comm.send(reply.set(staleness, applied ? 1 : 0).wire, device, PsTag.Reply);
          break;
        }
        case PsOp.Elastic: {
          await comm.recv(buf, device, PsTag.Data);
          // a replica holding NaN/Inf must not poison the centre: no exchange
          if (allFinite(buf))
            for (let i = 0; i < params.length; i++) {
              const d = a * (buf[i]! - params[i]!);
              params[i] = params[i]! + d;
              buf[i] = buf[i]! - d;
            }
          version++;
          await comm.send(buf, device, PsTag.Data);
          break;
        }
        case PsOp.WaitTurn:
          turnOf = b;
          waitingIn[device] = 'turn';
          while (turn % b !== a)
            if (!(await wokenWithin(turnWaiters, o.keepAliveMs)))
              await comm.send(reply.set(STILL_WAITING).wire, device, PsTag.Reply);
          waitingIn[device] = null;
          await comm.send(reply.set(0).wire, device, PsTag.Reply);
          break;
        case PsOp.PassTurn:
          turn++;
          wakeTurnWaiters();
          break;
        case PsOp.Finish:
          markDone(device);
          waitingIn[device] = 'finish';
          while (done.size < comm.size - 1)
            if (!(await wokenWithin(finishWaiters, o.keepAliveMs)))
              await comm.send(reply.set(STILL_WAITING).wire, device, PsTag.Reply);
          waitingIn[device] = null;
          await comm.send(reply.set(0).wire, device, PsTag.Reply);
          break;
        case PsOp.Snapshot: {
          // copied before the first await: no other device's update can interleave
          const copies = [params.slice(), ...optimizer.state().buffers.map((b) => b.data.slice())];
          await comm.send(reply.set(version, copies.length - 1, params.length).wire, device, PsTag.Reply);
          for (const c of copies) await comm.send(c, device, PsTag.Data);
          break;
        }
        case PsOp.Bye:
          return;
        default:
          throw new Error(`parameter server: device ${device - 1} sent an unknown request ${op}`);
      }
    }
  };
  const serveOrDrop = async (device: number) => {
    try {
      await serve(device);
    } catch (err) {
      // only the device's own loss is survivable; anything else is the server's failure
      if (!o.survivesLostDevices || !(err instanceof PeerFailedError) || err.failedRank !== device) throw err;
      markDone(device);
      o.onDeviceLost?.(device - 1, lastStep[device]!, err.reason);
    }
  };
  await Promise.all(Array.from({ length: comm.size - 1 }, (_, i) => serveOrDrop(i + 1)));
}
