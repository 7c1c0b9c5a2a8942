/**
 * The parameter server that the sync, async (Downpour) and asynchronous EASGD strategies share:
 * one authoritative copy of the weights with a version number, updated by whichever device gets
 * there first. This file is the interface; the implementations sit beside it:
 *   shared.ts        shared memory between the threads of one process
 *   remoteClient.ts  a device's handle on a server in another process, over a Communicator
 *   host.ts          that server's loop (rank 0 of its own world)
 *   protocol.ts      the wire protocol between the two
 */
import type { FlatRange, OptimizerState } from '../../optim/optimizer.ts';

/**
 * The server's whole state at one moment (for checkpoint sets): its weights, its version (updates
 * applied so far, which is also its optimizer's step count) and its optimizer's buffers in the
 * optimizer's own order (Adam: m, v; momentum SGD: velocity).
 */
export interface ParameterServerSnapshot {
  params: Float32Array;
  version: number;
  optimizer: Float32Array[];
}

/** Where a server starts: its weights, and for a resumed one its version and optimizer state. */
export interface ParameterServerStart {
  params: Float32Array;
  version: number;
  optimizer: OptimizerState | null;
  /** ranges of params its optimizer never updates (frozen layers; absent: none) */
  frozen?: FlatRange[];
}

/** What a device spent on the server since the last takeStats(); idleMs is part of commMs. */
export interface ParameterServerStats {
  commMs: number;
  idleMs: number;
  bytes: number;
}

export interface ParameterServer {
  /** Copies the server's weights into `into`; returns their version (updates applied so far). */
  pull(into: Float32Array): Promise<number>;
  /**
   * Applies a gradient computed on weights of version `computedAt` with the server's optimizer,
   * unless it is staler than `maxStaleness` (then it is dropped). Returns its staleness
   * (server version at arrival − computedAt) and whether it was applied.
   */
  push(
    grads: Float32Array,
    computedAt: number,
    lr: number,
    maxStaleness?: number,
  ): Promise<{ staleness: number; applied: boolean }>;
  /** Elastic averaging step, atomically: d = α(x − x̃); x̃ += d; x −= d. */
  elasticExchange(x: Float32Array, alpha: number): Promise<void>;
  /** Blocks until it is `rank`'s turn in round-robin order (the sync strategy). */
  waitTurn(rank: number, size: number): Promise<void>;
  /** Hands the turn to the next rank. */
  passTurn(): Promise<void>;
  /**
   * This device has made its last update: resolves once every device still alive has too (a
   * device that died is not waited for), so the server's weights are final. Replaces a barrier of
   * the devices in the strategies that go on without a dead device (async, asynchronous EASGD).
   */
  finish(): Promise<void>;
  /** A consistent copy of the server's state (taken atomically: no update half-applied). */
  snapshot(): Promise<ParameterServerSnapshot>;
  /** Notes the step this device is at (a remote server names it if the device dies). */
  atStep?(step: number): void;
  /** Time in server calls, of it idle (waiting for the lock or its turn), and bytes moved since the last call (then reset). */
  takeStats(): ParameterServerStats;
  /** This device is done with the server (a remote server stops serving it). */
  close?(): Promise<void>;
}

/**
 * A `modelParams` hook for parameter-server strategies: the server's current weights, pulled into
 * a buffer kept across calls (the replica's own weights are left alone).
 */
export function serverWeights(ps: ParameterServer): (replica: { params: Float32Array }) => Promise<Float32Array> {
  let snapshot = new Float32Array(0);
  return async (replica) => {
    if (snapshot.length !== replica.params.length) snapshot = new Float32Array(replica.params.length);
    await ps.pull(snapshot);
    return snapshot;
  };
}
