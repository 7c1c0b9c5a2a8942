import { MpiCommunicator } from '../../comm/mpi/index.ts';
import type { CrossWorldSpec } from './processWorld.ts';
import { disagreement, type Agreement } from '../../comm/tcp/agreement.ts';

/**
 * Joins the job's MPI world from a device thread (the only thread of this process that uses MPI)
 * and checks what the TCP rendezvous would: the same rank and size as the environment said, the
 * same model configuration as process 0, and the same data (the agreements: each set's fingerprint);
 * else the job is aborted with the reason, before any step.
 */
export async function joinMpiWorld(spec: Extract<CrossWorldSpec, { transport: 'mpi' }>): Promise<MpiCommunicator> {
  const comm = await MpiCommunicator.init();
  if (comm.rank !== spec.rank || comm.size !== spec.worldSize) {
    comm.abort(
      `paratrain: MPI says this is rank ${comm.rank} of ${comm.size}, the environment said ${spec.rank} of ${spec.worldSize}; ` +
        'start the job with mpirun (not by hand or another launcher) when using --transport mpi',
    );
  }
  const hash = Float32Array.from(spec.configHash, (c) => c.charCodeAt(0));
  const fromRoot = hash.slice();
  await comm.broadcast(fromRoot, 0);
  if (fromRoot.some((v, i) => v !== hash[i])) {
    const root = String.fromCharCode(...fromRoot);
    comm.abort(
      `paratrain: process ${comm.rank} has a different model configuration from process 0: config hash ${spec.configHash} vs ${root} — start every process with the same configuration`,
    );
  }
  const theirs = await broadcastText(comm, JSON.stringify(spec.agreements ?? []));
  if (comm.rank !== 0) {
    const differs = disagreement(
      JSON.parse(theirs) as Agreement[],
      spec.agreements ?? [],
      'process 0',
      `process ${comm.rank}`,
    );
    if (differs) comm.abort(`paratrain: ${differs}`);
  }
  return comm;
}

/** Process 0's `text` on every process (MPI moves floats here: its length, then one UTF-16 unit per float, exact in float32). */
async function broadcastText(comm: MpiCommunicator, text: string): Promise<string> {
  const length = Float32Array.of(text.length);
  await comm.broadcast(length, 0);
  const units = new Float32Array(length[0]!);
  if (comm.rank === 0) for (let i = 0; i < text.length; i++) units[i] = text.charCodeAt(i);
  await comm.broadcast(units, 0);
  let out = '';
  for (let i = 0; i < units.length; i += 4096) out += String.fromCharCode(...units.subarray(i, i + 4096));
  return out;
}
