/**
 * Where this process sits in a multi-process job, read from the environment a launcher leaves:
 *
 *   torchrun / paratrain launch   RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
 *   Open MPI (mpirun)             OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
 *                                 (+ OMPI_COMM_WORLD_LOCAL_SIZE to tell a one-host job)
 *   Slurm (srun)                  SLURM_PROCID, SLURM_NTASKS (or SLURM_NPROCS), SLURM_LOCALID,
 *                                 first host of SLURM_JOB_NODELIST (or SLURM_NODELIST)
 *   none of these                 a single process: rank 0 of 1
 *
 * The first style whose rank variable is set wins (torchrun, then Open MPI, then Slurm), so a
 * torchrun started inside a Slurm allocation is read as torchrun. Within a style:
 *
 * - MASTER_ADDR / MASTER_PORT, when set, always give the master (rank 0's host) — that is how
 *   mpirun users pass it (`mpirun -x MASTER_ADDR=…`).
 * - Otherwise: torchrun style requires MASTER_ADDR when WORLD_SIZE > 1; Open MPI uses 127.0.0.1
 *   when every rank is on this host (OMPI_COMM_WORLD_LOCAL_SIZE = OMPI_COMM_WORLD_SIZE), else the
 *   first Slurm host if there is an allocation, else it is an error; Slurm uses the first host of
 *   the node list (compressed lists such as `node[01-04,07]` are expanded).
 * - The port defaults to 29500 (torch's), or under Slurm to 29500 + SLURM_JOB_ID mod 1000 so that
 *   jobs sharing a node do not collide.
 * - A missing LOCAL_RANK (torchrun style, hand-written environments) means one host: localRank = rank.
 *
 * Every error is a RendezvousEnvError naming the variable and what to do. Pure: reads only `env`.
 */

export type RendezvousSource = 'torchrun' | 'openmpi' | 'slurm' | 'single';

/** Where this process sits in a job of several processes (rendezvousFromEnv). */
export interface RendezvousInfo {
  rank: number;
  worldSize: number;
  localRank: number;
  /** rank 0's host, where the TCP rendezvous server listens */
  masterAddr: string;
  masterPort: number;
  source: RendezvousSource;
}

export const DEFAULT_MASTER_PORT = 29500;

/** An environment variable is missing, malformed, or inconsistent with another; `variable` names it. */
export class RendezvousEnvError extends Error {
  override readonly name = 'RendezvousEnvError';
  readonly variable: string;
  constructor(variable: string, message: string) {
    super(message);
    this.variable = variable;
  }
}

type Env = Record<string, string | undefined>;

const present = (env: Env, name: string) => env[name] !== undefined && env[name]!.trim() !== '';

function intVar(env: Env, name: string, style: string, min = 0): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') {
    throw new RendezvousEnvError(name, `${name} is not set, but the ${style} environment needs it`);
  }
  const s = raw.trim();
  if (!/^\d+$/.test(s) || !Number.isSafeInteger(Number(s))) {
    throw new RendezvousEnvError(name, `${name}=${JSON.stringify(raw)} is not a non-negative integer`);
  }
  const v = Number(s);
  if (v < min) throw new RendezvousEnvError(name, `${name}=${v} must be at least ${min}`);
  return v;
}

function portVar(env: Env, fallback: number): number {
  if (!present(env, 'MASTER_PORT')) return fallback;
  const port = intVar(env, 'MASTER_PORT', 'MASTER_PORT');
  if (port < 1 || port > 65535)
    throw new RendezvousEnvError('MASTER_PORT', `MASTER_PORT=${port} is not a TCP port (1–65535)`);
  return port;
}

function checkRanks(
  rank: number,
  rankVar: string,
  worldSize: number,
  sizeVar: string,
  localRank: number,
  localVar: string,
): void {
  if (rank >= worldSize) {
    throw new RendezvousEnvError(
      rankVar,
      `${rankVar}=${rank} is out of range for ${sizeVar}=${worldSize} (ranks are 0…${worldSize - 1})`,
    );
  }
  if (localRank > rank) {
    throw new RendezvousEnvError(
      localVar,
      `${localVar}=${localRank} is larger than ${rankVar}=${rank}: a local rank counts ranks on one host, so it cannot exceed the global rank`,
    );
  }
}

function firstSlurmHost(env: Env): { host: string; variable: string } | undefined {
  for (const variable of ['SLURM_JOB_NODELIST', 'SLURM_NODELIST']) {
    if (!present(env, variable)) continue;
    let hosts: string[];
    try {
      hosts = expandNodeList(env[variable]!, 1);
    } catch (err) {
      throw new RendezvousEnvError(variable, `${variable}=${JSON.stringify(env[variable])}: ${(err as Error).message}`);
    }
    return { host: hosts[0]!, variable };
  }
  return undefined;
}

function slurmPort(env: Env): number {
  const job = env.SLURM_JOB_ID?.trim();
  return job && /^\d+$/.test(job) ? DEFAULT_MASTER_PORT + (Number(job) % 1000) : DEFAULT_MASTER_PORT;
}

/** See the file comment. `env` is usually `process.env`. */
export function rendezvousFromEnv(env: Env): RendezvousInfo {
  // torchrun style
  if (present(env, 'RANK') || present(env, 'WORLD_SIZE')) {
    const style = 'torchrun-style (RANK/WORLD_SIZE)';
    if (!present(env, 'WORLD_SIZE'))
      throw new RendezvousEnvError('WORLD_SIZE', `RANK is set but WORLD_SIZE is not: set both (torchrun does)`);
    if (!present(env, 'RANK'))
      throw new RendezvousEnvError('RANK', `WORLD_SIZE is set but RANK is not: set both (torchrun does)`);
    const rank = intVar(env, 'RANK', style);
    const worldSize = intVar(env, 'WORLD_SIZE', style, 1);
    const localRank = present(env, 'LOCAL_RANK') ? intVar(env, 'LOCAL_RANK', style) : rank;
    checkRanks(rank, 'RANK', worldSize, 'WORLD_SIZE', localRank, 'LOCAL_RANK');
    let masterAddr = env.MASTER_ADDR?.trim() ?? '';
    if (!masterAddr) {
      if (worldSize > 1) {
        throw new RendezvousEnvError(
          'MASTER_ADDR',
          `MASTER_ADDR is not set but WORLD_SIZE=${worldSize}: set it to the host of rank 0 (127.0.0.1 when every rank runs on this machine)`,
        );
      }
      masterAddr = '127.0.0.1';
    }
    return {
      rank,
      worldSize,
      localRank,
      masterAddr,
      masterPort: portVar(env, DEFAULT_MASTER_PORT),
      source: 'torchrun',
    };
  }

  // Open MPI
  if (present(env, 'OMPI_COMM_WORLD_RANK') || present(env, 'OMPI_COMM_WORLD_SIZE')) {
    const style = 'Open MPI (mpirun)';
    const rank = intVar(env, 'OMPI_COMM_WORLD_RANK', style);
    const worldSize = intVar(env, 'OMPI_COMM_WORLD_SIZE', style, 1);
    const localRank = present(env, 'OMPI_COMM_WORLD_LOCAL_RANK') ? intVar(env, 'OMPI_COMM_WORLD_LOCAL_RANK', style) : 0;
    checkRanks(
      rank,
      'OMPI_COMM_WORLD_RANK',
      worldSize,
      'OMPI_COMM_WORLD_SIZE',
      localRank,
      'OMPI_COMM_WORLD_LOCAL_RANK',
    );
    let masterAddr = env.MASTER_ADDR?.trim() ?? '';
    if (!masterAddr) {
      const localSize = present(env, 'OMPI_COMM_WORLD_LOCAL_SIZE')
        ? intVar(env, 'OMPI_COMM_WORLD_LOCAL_SIZE', style, 1)
        : undefined;
      const slurm = firstSlurmHost(env);
      if (worldSize === 1 || localSize === worldSize) masterAddr = '127.0.0.1';
      else if (slurm) masterAddr = slurm.host;
      else {
        throw new RendezvousEnvError(
          'MASTER_ADDR',
          `MASTER_ADDR is not set and the ${worldSize} Open MPI ranks ` +
            `${localSize === undefined ? 'may span' : `span (OMPI_COMM_WORLD_LOCAL_SIZE=${localSize})`} several hosts: ` +
            `pass rank 0's host, e.g. \`mpirun -x MASTER_ADDR=<host of rank 0> …\``,
        );
      }
    }
    return { rank, worldSize, localRank, masterAddr, masterPort: portVar(env, DEFAULT_MASTER_PORT), source: 'openmpi' };
  }

  // Slurm (inside an srun step: SLURM_PROCID is set per task)
  if (present(env, 'SLURM_PROCID')) {
    const style = 'Slurm (srun)';
    const rank = intVar(env, 'SLURM_PROCID', style);
    const sizeVar = present(env, 'SLURM_NTASKS')
      ? 'SLURM_NTASKS'
      : present(env, 'SLURM_NPROCS')
        ? 'SLURM_NPROCS'
        : 'SLURM_NTASKS';
    const worldSize = intVar(env, sizeVar, style, 1);
    const localRank = present(env, 'SLURM_LOCALID') ? intVar(env, 'SLURM_LOCALID', style) : 0;
    checkRanks(rank, 'SLURM_PROCID', worldSize, sizeVar, localRank, 'SLURM_LOCALID');
    let masterAddr = env.MASTER_ADDR?.trim() ?? '';
    if (!masterAddr) {
      const slurm = firstSlurmHost(env);
      if (slurm) masterAddr = slurm.host;
      else if (worldSize === 1) masterAddr = '127.0.0.1';
      else {
        throw new RendezvousEnvError(
          'SLURM_JOB_NODELIST',
          `neither SLURM_JOB_NODELIST nor SLURM_NODELIST nor MASTER_ADDR is set, ` +
            `so rank 0's host is unknown: run under srun inside an allocation, or set MASTER_ADDR`,
        );
      }
    }
    return { rank, worldSize, localRank, masterAddr, masterPort: portVar(env, slurmPort(env)), source: 'slurm' };
  }

  return {
    rank: 0,
    worldSize: 1,
    localRank: 0,
    masterAddr: env.MASTER_ADDR?.trim() || '127.0.0.1',
    masterPort: portVar(env, DEFAULT_MASTER_PORT),
    source: 'single',
  };
}

/**
 * Expands a Slurm host list: `node[01-04,07],gpu1,rack[1-2]-n[1-2]` →
 * node01 node02 node03 node04 node07 gpu1 rack1-n1 rack1-n2 rack2-n1 rack2-n2. Zero padding of a
 * range's first bound is kept (`[08-10]` → 08 09 10). Throws on malformed input. Stops after
 * `limit` hosts (the rendezvous only needs the first).
 */
export function expandNodeList(list: string, limit = Infinity): string[] {
  const s = list.trim();
  if (!s) throw new Error('the node list is empty');
  // split at commas outside brackets
  const items: string[] = [];
  let depth = 0,
    start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '[') {
      if (depth++ > 0) throw new Error(`nested '[' at position ${i}`);
    } else if (c === ']') {
      if (--depth < 0) throw new Error(`unmatched ']' at position ${i}`);
    } else if (c === ',' && depth === 0) {
      items.push(s.slice(start, i));
      start = i + 1;
    }
  }
  if (depth !== 0) throw new Error(`unclosed '['`);
  items.push(s.slice(start));
  const out: string[] = [];
  for (const item of items) {
    if (!item.trim()) throw new Error('an empty host name between commas');
    for (const host of expandItem(item.trim(), limit - out.length)) {
      out.push(host);
      if (out.length >= limit) return out;
    }
  }
  return out;
}

/** One comma-free item, possibly with several bracket groups (cartesian product, left to right). */
function expandItem(item: string, limit: number): string[] {
  let acc = [''];
  let i = 0;
  while (i < item.length) {
    const open = item.indexOf('[', i);
    if (open < 0) {
      acc = acc.map((p) => p + item.slice(i));
      break;
    }
    const close = item.indexOf(']', open);
    const prefix = item.slice(i, open);
    const choices = expandGroup(item.slice(open + 1, close), item);
    const next: string[] = [];
    outer: for (const p of acc) {
      for (const c of choices) {
        next.push(p + prefix + c);
        if (next.length >= limit) break outer;
      }
    }
    acc = next;
    i = close + 1;
  }
  return acc;
}

function expandGroup(group: string, item: string): string[] {
  if (!group) throw new Error(`empty brackets in ${JSON.stringify(item)}`);
  const out: string[] = [];
  for (const part of group.split(',')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) throw new Error(`${JSON.stringify(part)} in ${JSON.stringify(item)} is not a number or a range like 01-04`);
    const lo = m[1]!,
      hi = m[2];
    if (hi === undefined) {
      out.push(lo);
      continue;
    }
    const a = Number(lo),
      b = Number(hi);
    if (b < a) throw new Error(`range ${part} in ${JSON.stringify(item)} runs backwards`);
    if (b - a > 1_000_000) throw new Error(`range ${part} in ${JSON.stringify(item)} is implausibly large`);
    for (let v = a; v <= b; v++) out.push(String(v).padStart(lo.length, '0'));
  }
  return out;
}
