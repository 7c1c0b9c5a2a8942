import { launchWithRestarts } from '../runtime/job/launchRestarts.ts';

export interface LaunchFlags {
  nprocPerNode: number;
  nnodes: number;
  nodeRank: number;
  masterAddr: string;
  masterPort: number;
  maxRestarts: number;
}

/** `paratrain launch [options] -- train CONFIG …`: exits with the job's exit code. */
export async function runLaunch(args: string[], flags: LaunchFlags): Promise<void> {
  if (flags.nodeRank >= flags.nnodes) {
    throw new Error(
      `--node-rank: ${flags.nodeRank} is out of range for --nnodes ${flags.nnodes} (0 … ${flags.nnodes - 1})`,
    );
  }
  if (args[0] !== 'train') {
    throw new Error(
      `launch: expected the command to run after --, e.g. paratrain launch --nproc-per-node 2 -- train examples/mnist-small.yaml (got '${args.join(' ')}')`,
    );
  }
  process.exitCode = await launchWithRestarts({ ...flags, args });
}
