/**
 * What examples/cluster/ gives each process of a job, computed as the cluster would:
 * - kubernetes.yaml: each pod's environment as the kubelet builds it (values with $(VAR) expansion,
 *   the downward API's fieldRefs, secretKeyRefs, the JOB_COMPLETION_INDEX the Job controller adds)
 *   and its command with $(VAR) expanded from that environment;
 * - slurm.sbatch: the batch script itself, run by bash under a made-up allocation with stand-ins for
 *   `scontrol` and `srun` on PATH; the srun stand-in records what the script hands it, and each task
 *   gets that environment plus what srun sets per task (SLURM_PROCID, SLURM_LOCALID, …).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { REPO } from '../cli/helpers.ts';

export const KUBERNETES_EXAMPLE = join(REPO, 'examples', 'cluster', 'kubernetes.yaml');
export const SLURM_EXAMPLE = join(REPO, 'examples', 'cluster', 'slurm.sbatch');

export type Env = Record<string, string>;

/** One process of the job: its environment and its command line. */
export interface ProcessLaunch {
  env: Env;
  argv: string[];
}

// ---------------------------------------------------------------- Kubernetes

export const INDEX_ANNOTATION = 'batch.kubernetes.io/job-completion-index';

interface EnvVar {
  name: string;
  value?: unknown;
  valueFrom?: { fieldRef?: { fieldPath: string }; secretKeyRef?: { name: string; key: string } };
}
interface Container {
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  volumeMounts?: { name: string; mountPath: string }[];
}
interface PodSpec {
  subdomain?: string;
  containers: Container[];
  volumes?: { name: string }[];
}
export interface KubeObject {
  kind: string;
  metadata: { name: string };
  spec: {
    clusterIP?: string;
    selector?: Record<string, string>;
    completionMode?: string;
    parallelism?: number;
    completions?: number;
    template?: { metadata?: { labels?: Record<string, string> }; spec: PodSpec };
  };
}

/** Every document of a manifest file, parsed; a YAML error names the file and the line. */
export function loadManifests(file: string): KubeObject[] {
  const docs = parseAllDocuments(readFileSync(file, 'utf8'));
  return docs.map((doc) => {
    if (doc.errors.length) throw new Error(`${file}: ${doc.errors[0]!.message}`);
    return doc.toJS() as KubeObject;
  });
}

export function findKind(objects: KubeObject[], kind: string, name?: string): KubeObject {
  const found = objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  assert.ok(found, `kubernetes.yaml: no ${kind}${name ? ` named ${name}` : ''}`);
  return found;
}

/** The Job's one container: the process every pod runs. */
export function jobContainer(job: KubeObject): Container {
  const containers = job.spec.template!.spec.containers;
  assert.equal(containers.length, 1, 'kubernetes.yaml: the Job runs one container per pod');
  return containers[0]!;
}

/** The labels the Job controller gives pod `index` (besides the template's own). */
export function podLabels(job: KubeObject, index: number): Record<string, string> {
  const name = job.metadata.name;
  return {
    ...job.spec.template!.metadata?.labels,
    'job-name': name,
    'batch.kubernetes.io/job-name': name,
    [INDEX_ANNOTATION]: String(index),
  };
}

/**
 * Kubernetes' $(VAR) expansion (k8s.io/kubernetes third_party/forked/golang/expansion): `$(NAME)`
 * becomes the variable's value when it is defined, else stays as written; `$$` is a literal `$`.
 */
export function expandK8s(input: string, defined: Env): string {
  let out = '';
  for (let i = 0; i < input.length; i++) {
    const c = input[i]!;
    if (c !== '$' || i + 1 === input.length) {
      out += c;
      continue;
    }
    const next = input[i + 1]!;
    const close = input.indexOf(')', i + 2);
    if (next === '$') out += '$';
    else if (next === '(' && close >= 0) {
      const name = input.slice(i + 2, close);
      out += Object.hasOwn(defined, name) ? defined[name] : `$(${name})`;
      i = close - 1;
    } else out += `$${next}`;
    i++;
  }
  return out;
}

/** What the cluster knows of pod `index` that the downward API and secrets can hand to it. */
export interface PodFacts {
  namespace: string;
  /** Secret name → key → value */
  secrets: Record<string, Record<string, string>>;
}

function fieldRef(path: string, job: KubeObject, index: number, facts: PodFacts): string {
  const keyed = /^metadata\.(labels|annotations)\['([^']+)'\]$/.exec(path);
  if (keyed) {
    const map = keyed[1] === 'labels' ? podLabels(job, index) : { [INDEX_ANNOTATION]: String(index) };
    const value = map[keyed[2]!];
    assert.ok(value !== undefined, `kubernetes.yaml: fieldRef ${path}: the Job's pods have no such ${keyed[1]}`);
    return value;
  }
  if (path === 'metadata.namespace') return facts.namespace;
  if (path === 'metadata.name') return `${job.metadata.name}-${index}-x7k2p`;
  throw new Error(`kubernetes.yaml: fieldRef ${path} is not modelled by test/comm/clusterEnv.ts: add it there`);
}

/**
 * Pod `index`'s environment and command, as the kubelet builds them: the env list in order (the
 * Job controller appends JOB_COMPLETION_INDEX unless the container sets it), each value expanded
 * from the variables before it; then the command expanded from the whole environment.
 */
export function podLaunch(job: KubeObject, index: number, facts: PodFacts): ProcessLaunch {
  const container = jobContainer(job);
  const entries: EnvVar[] = [...(container.env ?? [])];
  if (!entries.some((e) => e.name === 'JOB_COMPLETION_INDEX'))
    entries.push({
      name: 'JOB_COMPLETION_INDEX',
      valueFrom: { fieldRef: { fieldPath: `metadata.annotations['${INDEX_ANNOTATION}']` } },
    });
  const env: Env = {};
  for (const e of entries) {
    if (e.value !== undefined) {
      assert.equal(typeof e.value, 'string', `kubernetes.yaml: env ${e.name}: a value must be a string (quote it)`);
      env[e.name] = expandK8s(e.value as string, env);
    } else if (e.valueFrom?.fieldRef) env[e.name] = fieldRef(e.valueFrom.fieldRef.fieldPath, job, index, facts);
    else if (e.valueFrom?.secretKeyRef) {
      const { name, key } = e.valueFrom.secretKeyRef;
      const value = facts.secrets[name]?.[key];
      assert.ok(value !== undefined, `kubernetes.yaml: env ${e.name}: the test has no Secret ${name} with key ${key}`);
      env[e.name] = value;
    } else env[e.name] = '';
  }
  const argv = [...(container.command ?? []), ...(container.args ?? [])].map((a) => expandK8s(a, env));
  return { env, argv };
}

/** The manifest as a user edits it for `n` processes: parallelism, completions and WORLD_SIZE. */
export function withProcesses(objects: KubeObject[], n: number): KubeObject[] {
  const copy = structuredClone(objects);
  const job = findKind(copy, 'Job');
  job.spec.parallelism = n;
  job.spec.completions = n;
  const worldSize = jobContainer(job).env?.find((e) => e.name === 'WORLD_SIZE');
  assert.ok(worldSize, 'kubernetes.yaml: the container sets no WORLD_SIZE');
  worldSize.value = String(n);
  return copy;
}

/** Sets (or adds) a plain env value of the Job's container, as a user edits the manifest. */
export function setEnvValue(objects: KubeObject[], name: string, value: string): void {
  const container = jobContainer(findKind(objects, 'Job'));
  const entry = container.env?.find((e) => e.name === name);
  if (entry) {
    entry.value = value;
    delete entry.valueFrom;
  } else (container.env ??= []).push({ name, value });
}

// ---------------------------------------------------------------- Slurm

/** The script's `#SBATCH --key=value` options (sbatch reads them up to the first command). */
export function sbatchOptions(script: string): Map<string, string> {
  const options = new Map<string, string>();
  for (const line of script.split('\n')) {
    if (line !== '' && !line.startsWith('#')) break;
    const m = /^#SBATCH\s+--([a-z-]+)(?:=(\S+))?/.exec(line);
    if (m) options.set(m[1]!, m[2] ?? '');
  }
  return options;
}

/** srun options the stand-in accepts: they change nothing about where each task sits. */
const SRUN_OPTIONS = /^--(label|kill-on-bad-exit(=\d)?)$/;

export interface Allocation {
  jobId: number;
  hosts: string[];
  /** the compressed list Slurm writes, e.g. node[01-03] */
  nodeList: string;
  tasksPerNode: number;
  cpusPerTask: number;
}

const SCONTROL = `#!/bin/bash
# stands in for \`scontrol show hostnames LIST\`: the made-up allocation's hosts, one a line
if [ "$1 $2" != "show hostnames" ] || [ "$3" != "$SLURM_JOB_NODELIST" ]; then
  echo "scontrol stand-in: expected 'show hostnames $SLURM_JOB_NODELIST', got '$*'" >&2; exit 2
fi
printf '%s\\n' $STANDIN_HOSTS
`;
const SRUN = `#!/bin/bash
# stands in for srun: records its arguments and environment for the test, which starts the tasks
printf '%s\\0' "$@" > "$STANDIN_RECORD.args"
env -0 > "$STANDIN_RECORD.env"
`;

const nulList = (file: string) => readFileSync(file, 'utf8').split('\0').slice(0, -1);

/**
 * Runs `script` with bash as sbatch would in `allocation` (the batch step's SLURM_* variables, the
 * submit directory as working directory, `extra` on top), and returns each task's launch: srun's
 * environment plus the variables srun sets per task, and the command srun was given.
 */
export function slurmTasks(script: string, allocation: Allocation, dir: string, extra: Env): ProcessLaunch[] {
  const { jobId, hosts, nodeList, tasksPerNode, cpusPerTask } = allocation;
  const n = hosts.length * tasksPerNode;
  for (const [name, text] of [
    ['scontrol', SCONTROL],
    ['srun', SRUN],
  ] as const) {
    writeFileSync(join(dir, name), text);
    chmodSync(join(dir, name), 0o755);
  }
  const record = join(dir, 'srun');
  const batch: Env = {
    PATH: `${dir}:${process.env.PATH}`,
    HOME: process.env.HOME ?? dir,
    SLURM_JOB_ID: String(jobId),
    SLURM_JOBID: String(jobId),
    SLURM_JOB_NAME: 'paratrain',
    SLURM_JOB_NODELIST: nodeList,
    SLURM_NODELIST: nodeList,
    SLURM_JOB_NUM_NODES: String(hosts.length),
    SLURM_NNODES: String(hosts.length),
    SLURM_NTASKS: String(n),
    SLURM_NPROCS: String(n),
    SLURM_NTASKS_PER_NODE: String(tasksPerNode),
    SLURM_TASKS_PER_NODE: `${tasksPerNode}(x${hosts.length})`,
    SLURM_CPUS_PER_TASK: String(cpusPerTask),
    SLURM_SUBMIT_DIR: REPO,
    // the batch script itself runs as task 0 of the batch step on the first node
    SLURMD_NODENAME: hosts[0]!,
    SLURM_NODEID: '0',
    SLURM_PROCID: '0',
    SLURM_LOCALID: '0',
    STANDIN_HOSTS: hosts.join(' '),
    STANDIN_RECORD: record,
    ...extra,
  };
  const ran = spawnSync('bash', [script], { cwd: REPO, env: batch, encoding: 'utf8', timeout: 20_000 });
  assert.equal(ran.status, 0, `bash ${script} under the made-up allocation:\n${ran.stderr}`);
  const args = nulList(`${record}.args`);
  const env: Env = Object.fromEntries(
    nulList(`${record}.env`).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
  let first = 0;
  while (args[first]?.startsWith('-')) {
    assert.match(args[first]!, SRUN_OPTIONS, `srun ${args[first]}: the stand-in does not model it (clusterEnv.ts)`);
    first++;
  }
  const argv = args.slice(first);
  return Array.from({ length: n }, (_, task) => {
    const node = Math.floor(task / tasksPerNode);
    return {
      argv,
      env: {
        ...env,
        SLURM_STEP_ID: '0',
        SLURM_STEPID: '0',
        SLURM_STEP_NODELIST: nodeList,
        SLURM_STEP_NUM_NODES: String(hosts.length),
        SLURM_STEP_NUM_TASKS: String(n),
        SLURM_NTASKS: String(n),
        SLURM_NPROCS: String(n),
        SLURM_PROCID: String(task),
        SLURM_LOCALID: String(task % tasksPerNode),
        SLURM_NODEID: String(node),
        SLURMD_NODENAME: hosts[node]!,
      },
    };
  });
}
