/**
 * A device thread's links to the other processes of its job: the cross-process world of its thread
 * index (TCP, or MPI under mpirun; under the hierarchical allreduce when its process has several
 * threads) and the remote parameter server in process 0. deviceWorker.ts loads this module only for
 * a job of several processes, so the device threads of a one-process job start without the
 * transports' modules (about a fifth of what a device thread loads).
 */
import type { Communicator } from '../../comm/communicator.ts';
import type { ShmCommunicator } from '../../comm/shm/index.ts';
import type { MpiCommunicator } from '../../comm/mpi/index.ts';
import { TcpCommunicator } from '../../comm/tcp/index.ts';
import { HierarchicalCommunicator } from '../../comm/hierarchical.ts';
import { RemoteParameterServer } from '../../parallel/parameterServer/remoteClient.ts';
import { tcpOptionsOf, type CrossWorldSpec, type TcpWorldSpec } from './processWorld.ts';
import { joinMpiWorld } from './mpiWorld.ts';

/** The links a device thread opened, kept so a failure can abort them and the end close them. */
export class ProcessLinks {
  private readonly tcp: TcpCommunicator[] = [];
  private mpi: MpiCommunicator | null = null;

  /** Joins this thread index's world across the processes; returns the device's communicator. */
  async joinCross(spec: CrossWorldSpec, local: ShmCommunicator): Promise<Communicator> {
    let cross: Communicator;
    if (spec.transport === 'mpi') {
      cross = this.mpi = await joinMpiWorld(spec);
    } else {
      const t = await TcpCommunicator.connect(spec);
      this.tcp.push(t);
      cross = t;
    }
    return local.size > 1 ? new HierarchicalCommunicator(local, cross) : cross;
  }

  /** Connects to the parameter server in process 0. */
  async remoteParameterServer(spec: TcpWorldSpec): Promise<RemoteParameterServer> {
    const link = await TcpCommunicator.connect(tcpOptionsOf(spec));
    this.tcp.push(link);
    return new RemoteParameterServer(link);
  }

  /** Closes every link (after the run: the parameter server first, by its owner). */
  async close(): Promise<void> {
    for (const c of this.tcp) await c.close();
    await this.mpi?.close();
  }

  /**
   * A failure: tells the other processes at once rather than leaving them to time out. MPI has no
   * gentler way to stop them than an abort (mpirun ends the job, printing the cause), a moment
   * later so the cause is posted first.
   */
  abort(cause: string): void {
    for (const c of this.tcp) c.abort(cause);
    const mpi = this.mpi;
    if (mpi) setTimeout(() => mpi.abort(`paratrain: ${cause}`), 200);
  }
}
