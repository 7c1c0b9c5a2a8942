import { createHash } from 'node:crypto';
import type { RunConfig } from '../../config/runConfig.ts';
import { deviceName } from './deviceNames.ts';
import type { JobShape } from './jobShape.ts';
import type { Agreement } from '../../comm/tcp/agreement.ts';
import { datasetFingerprint } from '../../data/fingerprint.ts';
import type { Dataset } from '../../data/dataset.ts';

/**
 * Where this process sits in a job of several processes (from rendezvousFromEnv), and the TCP
 * worlds its threads join. Ports, counted from the master port P on the master host:
 *   P + ℓ   the cross-process world of thread index ℓ (one per thread index: hierarchical collectives)
 *   P + L   the parameter server's world (server in process 0, every device a client), when used
 */
export interface ProcessPlacement {
  process: number;
  processes: number;
  masterAddr: string;
  masterPort: number;
  /** hash of the model configuration; processes whose hash differs are refused at rendezvous */
  configHash: string;
  /** what else must agree with process 0 (the data's fingerprint: dataAgreements); refused at rendezvous when it differs */
  agreements?: Agreement[];
  /** rendezvous and per-wait deadline, ms */
  timeoutMs: number;
  /** what carries the collectives between processes (the parameter server always uses TCP) */
  transport: 'tcp' | 'mpi';
  /** the stall inspector's threshold, ms (train.stallWarningSeconds; 0 or absent: off) */
  stallMs?: number;
}

/** The cross-process world of a thread: TCP, or MPI (one device thread per process). */
export type CrossWorldSpec =
  | ({ transport: 'tcp' } & TcpWorldSpec)
  | { transport: 'mpi'; rank: number; worldSize: number; configHash: string; agreements?: Agreement[] };

/** What a thread needs to join one TCP world. */
export interface TcpWorldSpec {
  rank: number;
  worldSize: number;
  masterAddr: string;
  masterPort: number;
  configHash: string;
  agreements?: Agreement[];
  timeoutMs: number;
  /** how long the parameter server waits for a device's next request (a step, an evaluation) */
  recvTimeoutMs?: number;
  /** what messages call each rank of this world (the one numbering: deviceNames.ts) */
  rankNames?: readonly string[];
  /** the parameter server's world of a strategy that goes on without a dead device: a lost device fails only its own calls */
  dropsLostDevices?: boolean;
  /** a wait for a peer longer than this (ms) is reported once (TcpConnectOptions.stallMs) */
  stallMs?: number;
}

export function crossWorldOf(p: ProcessPlacement, thread: number): CrossWorldSpec {
  if (p.transport === 'mpi')
    return {
      transport: 'mpi',
      rank: p.process,
      worldSize: p.processes,
      configHash: p.configHash,
      agreements: p.agreements,
    };
  // a cross world's ranks are the processes: messages say `process p`, as the launcher does
  return {
    transport: 'tcp',
    rank: p.process,
    worldSize: p.processes,
    masterAddr: p.masterAddr,
    masterPort: p.masterPort + thread,
    configHash: p.configHash,
    agreements: p.agreements,
    timeoutMs: p.timeoutMs,
    rankNames: Array.from({ length: p.processes }, (_, q) => `process ${q}`),
    stallMs: p.stallMs ?? 0,
  };
}

/** Rank 0 is the server (process 0's main thread); device g of the job (`shape`) is rank g + 1. */
export function parameterServerWorldOf(
  p: ProcessPlacement,
  shape: JobShape,
  rank: number,
  dropsLostDevices = false,
): TcpWorldSpec {
  return {
    rank,
    worldSize: shape.devices + 1,
    masterAddr: p.masterAddr,
    masterPort: p.masterPort + shape.threads,
    configHash: p.configHash,
    agreements: p.agreements,
    timeoutMs: p.timeoutMs,
    rankNames: [
      'the parameter server (process 0)',
      ...Array.from({ length: shape.devices }, (_, d) => deviceName(d, shape)),
    ],
    ...(rank === 0 ? { recvTimeoutMs: 7 * 24 * 3600_000 } : {}),
    ...(dropsLostDevices ? { dropsLostDevices } : {}),
    // devices report a server that does not answer; the server waiting for requests is no stall
    stallMs: rank === 0 ? 0 : (p.stallMs ?? 0),
  };
}

/** connect() options of a TCP world: a parameter-server world that drops lost devices isolates them (TcpConnectOptions.onPeerLost). */
export function tcpOptionsOf(
  spec: TcpWorldSpec,
  onPeerLost: (rank: number, err: Error) => void = () => {},
): TcpWorldSpec & { onPeerLost?: (rank: number, err: Error) => void } {
  return spec.dropsLostDevices ? { ...spec, onPeerLost } : spec;
}

/**
 * A hash of everything that must agree between processes: the model, loss, optimizer, schedule,
 * batching and training options. Paths and the kernel backend may differ from host to host.
 */
export function configHash(config: RunConfig): string {
  const { dir: _dir, ...data } = config.data;
  const { backend: _backend, ...train } = config.train;
  return createHash('sha256')
    .update(JSON.stringify({ ...config, data, train }))
    .digest('hex')
    .slice(0, 16);
}

/**
 * What every process's data must share with process 0's, checked at rendezvous next to the config
 * hash: each set's fingerprint (data/fingerprint.ts); the source is shown, not compared.
 */
export function dataAgreements(source: string, train: Dataset, test?: Dataset, validation?: Dataset): Agreement[] {
  const fix = 'every process must read the same dataset (check --data / data.dir and the files in it on every host)';
  const none = { samples: '0' };
  return [
    { what: 'training data', fields: datasetFingerprint(train), source, fix },
    { what: 'test data', fields: test ? datasetFingerprint(test) : none, source, fix },
    ...(validation ? [{ what: 'validation data', fields: datasetFingerprint(validation), source, fix }] : []),
  ];
}
