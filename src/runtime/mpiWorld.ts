import { MpiCommunicator } from '../comm/mpi/index.ts';
import type { CrossWorldSpec } from './processWorld.ts';

/**
 * Joins the job's MPI world from a device thread (the only thread of this process that uses MPI)
 * and checks what the TCP rendezvous would: the same rank and size as the environment said, and
 * the same model configuration as process 0 (else the job is aborted with the reason).
 */
export async function joinMpiWorld(spec: Extract<CrossWorldSpec, { transport: 'mpi' }>): Promise<MpiCommunicator> {
  const comm = await MpiCommunicator.init();
  if (comm.rank !== spec.rank || comm.size !== spec.worldSize) {
    comm.abort(`paratrain: MPI says this is rank ${comm.rank} of ${comm.size}, the environment said ${spec.rank} of ${spec.worldSize}; ` +
      'start the job with mpirun (not by hand or another launcher) when using --transport mpi');
  }
  const hash = Float32Array.from(spec.configHash, (c) => c.charCodeAt(0));
  const fromRoot = hash.slice();
  await comm.broadcast(fromRoot, 0);
  if (fromRoot.some((v, i) => v !== hash[i])) {
    const root = String.fromCharCode(...fromRoot);
    comm.abort(`paratrain: process ${comm.rank} has a different model configuration from process 0: config hash ${spec.configHash} vs ${root} — start every process with the same configuration`);
  }
  return comm;
}
