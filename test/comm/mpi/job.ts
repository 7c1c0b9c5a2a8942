/**
 * Runs a rank script of these tests as one `mpirun` job (or as one process without mpirun when np
 * is 0) and reads back the rank-R.json files it writes into its OUT_DIR (its first argument).
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mpiAddonPath } from '../../../src/comm/mpi/index.ts';

const hasMpirun = spawnSync('mpirun', ['--version'], { encoding: 'utf8' }).status === 0;

/** Why the MPI tests cannot run here, or false. */
export const mpiSkip = !hasMpirun
  ? 'mpirun not found (apt-get install openmpi-bin libopenmpi-dev, then npm run build:mpi)'
  : !mpiAddonPath()
    ? 'the MPI addon is not built (apt-get install libopenmpi-dev, then npm run build:mpi)'
    : process.env.PARATRAIN_MPI === '0'
      ? 'PARATRAIN_MPI=0'
      : false;

/** `script OUT_DIR ...args` on `np` processes: exit code, output, every rank's result (by rank). */
export async function runMpiJob<R>(
  script: string,
  np: number,
  args: string[] = [],
): Promise<{ code: number | null; output: string; results: R[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-mpi-'));
  try {
    const node = [process.execPath, '--import', 'tsx', script, dir, ...args];
    const asRoot = process.getuid?.() === 0 ? ['--allow-run-as-root'] : [];
    // --bind-to none: the machine is shared; do not pin ranks to cores
    const [cmd, ...rest] =
      np === 0 ? node : ['mpirun', ...asRoot, '--oversubscribe', '--bind-to', 'none', '-np', String(np), ...node];
    const child = spawn(cmd!, rest, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => {
      output += d;
    });
    child.stderr.on('data', (d) => {
      output += d;
    });
    const kill = setTimeout(() => child.kill('SIGKILL'), 90_000);
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    clearTimeout(kill);
    const files = readdirSync(dir)
      .filter((f) => f.startsWith('rank-'))
      .sort((a, b) => Number(a.slice(5, -5)) - Number(b.slice(5, -5)));
    const results = files.map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as R);
    return { code, output, results };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
