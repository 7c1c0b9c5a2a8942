/**
 * examples/cluster/ (docs/cluster.md): the Kubernetes Indexed Job and the Slurm batch script must give
 * every process the environment paratrain reads. For 2 and 3 processes, each example's environments
 * are computed as the cluster would (clusterEnv.ts), pointed at loopback (the master address and
 * port, the run volume) and handed to that many real `paratrain train` processes: each must take its
 * own rank, the job must form across all of them and finish, and its model must equal the same job
 * on as many threads in one process. A self-check breaks each example's environment and expects the
 * check to fail.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliArgs, REPO, tmpDir } from '../cli/helpers.ts';
import { assertClose, randomPort, SECRET, tinyJobConfig, trainHere, weights } from '../runtime/jobHelpers.ts';
import {
  type Env,
  findKind,
  jobContainer,
  type KubeObject,
  KUBERNETES_EXAMPLE,
  loadManifests,
  podLabels,
  podLaunch,
  type ProcessLaunch,
  sbatchOptions,
  setEnvValue,
  SLURM_EXAMPLE,
  slurmTasks,
  withProcesses,
} from './clusterEnv.ts';

const dir = tmpDir('paratrain-cluster-env-');
// one device per process, so that a job of N processes is hybrid on N devices
const config = tinyJobConfig(dir, ', devices: 1, strategy: hybrid');
const NAMESPACE = 'ml-team';
const SECRETS = { 'paratrain-secret': { secret: SECRET } };

/** The same job on `n` threads in one process, trained once per n: what every cluster job must equal. */
const references = new Map<number, Float32Array>();
async function reference(n: number): Promise<Float32Array> {
  if (!references.has(n)) {
    await trainHere(config, join(dir, `threads-${n}`), { devices: n });
    references.set(n, weights(join(dir, `threads-${n}`, 'model.safetensors')));
  }
  return references.get(n)!;
}

/** A launch as it runs here: the CLI from source for `npx paratrain`, the master on loopback, volumes in `mounts`. */
function onLoopback(launch: ProcessLaunch, port: number, mounts: [string, string][] = []): ProcessLaunch {
  assert.deepEqual(launch.argv.slice(0, 3), ['npx', 'paratrain', 'train'], `the command: ${launch.argv.join(' ')}`);
  const remount = (arg: string) => {
    const mount = mounts.find(([path]) => arg.startsWith(`${path}/`));
    return mount ? mount[1] + arg.slice(mount[0].length) : arg;
  };
  return {
    argv: [process.execPath, ...cliArgs(), ...launch.argv.slice(2).map(remount)],
    env: { ...launch.env, MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(port) },
  };
}

interface Ended {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Starts every process; once one fails the others are killed (they would wait for it until --timeout). */
function runJob(launches: ProcessLaunch[]): Promise<Ended[]> {
  return new Promise((resolve, reject) => {
    const ended: Ended[] = [];
    let running = launches.length;
    const children = launches.map((l) =>
      spawn(l.argv[0]!, l.argv.slice(1), { cwd: REPO, env: l.env, stdio: ['ignore', 'pipe', 'pipe'] }),
    );
    const killAll = () => {
      for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    };
    const timer = setTimeout(killAll, 90_000);
    children.forEach((child, i) => {
      const e: Ended = { code: null, stdout: '', stderr: '' };
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        e.stdout += d;
      });
      child.stderr.setEncoding('utf8').on('data', (d: string) => {
        e.stderr += d;
      });
      child.on('error', reject);
      child.on('close', (code) => {
        e.code = code;
        ended[i] = e;
        if (code !== 0) killAll();
        if (--running === 0) {
          clearTimeout(timer);
          resolve(ended);
        }
      });
    });
  });
}

const events = (file: string) =>
  readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { type: string; rank?: number; processes?: number; devices?: number });

/** Every process finished, each took its own rank, and the run directory records one job of `n` processes. */
function checkJob(ended: Ended[], n: number, runDir: string): void {
  const outputs = ended
    .map((e, p) => `--- process ${p} (exit ${e.code}):\n${e.stdout}${e.stderr.slice(-1500)}`)
    .join('\n');
  ended.forEach((e, p) => {
    assert.equal(e.code, 0, `process ${p} failed:\n${outputs}`);
  });
  ended.forEach((e, p) => {
    const summary = JSON.parse(e.stdout.trim().split('\n').at(-1)!) as { rank?: number; runDir?: string };
    if (p === 0) assert.equal(summary.runDir, runDir, `process 0 reports for the job:\n${outputs}`);
    else assert.equal(summary.rank, p, `process ${p} took rank ${p}:\n${outputs}`);
  });
  const main = events(join(runDir, 'metrics.jsonl'));
  const start = main.find((e) => e.type === 'start')!;
  assert.equal(start.processes, n, `one job of ${n} processes:\n${outputs}`);
  assert.equal(start.devices, n);
  const steps = main.filter((e) => e.type === 'step').length;
  assert.ok(steps > 0);
  for (let p = 1; p < n; p++) {
    const own = events(join(runDir, `metrics.process-${p}.jsonl`));
    assert.equal(own.find((e) => e.type === 'start')?.processes, n, `process ${p} joined the job of ${n}`);
    const stepRanks = own.filter((e) => e.type === 'step').map((e) => e.rank);
    assert.deepEqual(stepRanks, Array(steps).fill(p), `process ${p} ran every step as device ${p}`);
    assert.ok(own.some((e) => e.type === 'end'));
  }
}

// ---------------------------------------------------------------- Kubernetes

/**
 * Each pod's launch from kubernetes.yaml edited for `n` processes and this test's config, on
 * loopback; each volume mounted from a folder of `volumes` named after it.
 */
function kubernetesJob(n: number, volumes: string, edit: (objects: KubeObject[]) => void = () => {}): ProcessLaunch[] {
  const objects = withProcesses(loadManifests(KUBERNETES_EXAMPLE), n);
  setEnvValue(objects, 'CONFIG', config);
  edit(objects);
  const job = findKind(objects, 'Job');
  const mounts = (jobContainer(job).volumeMounts ?? []).map((m): [string, string] => [
    m.mountPath,
    join(volumes, m.name),
  ]);
  for (const [, local] of mounts) mkdirSync(local, { recursive: true });
  // pod 0's full name through the headless Service (its own /etc/hosts holds it)
  const pod0 = `${job.metadata.name}-0.${job.spec.template!.spec.subdomain}.${NAMESPACE}.svc.cluster.local`;
  const port = randomPort();
  return Array.from({ length: n }, (_, index) => {
    const pod = podLaunch(job, index, { namespace: NAMESPACE, secrets: SECRETS });
    assert.equal(pod.env.MASTER_ADDR, pod0, `pod ${index}: MASTER_ADDR names pod 0`);
    // the image's own environment, then the container's
    const env: Env = { PATH: process.env.PATH!, HOME: process.env.HOME ?? dir, ...pod.env };
    return onLoopback({ env, argv: pod.argv }, port, mounts);
  });
}

test('kubernetes.yaml: a headless Service names pod 0, N agrees in the Job and WORLD_SIZE, the run directory is on a volume', () => {
  const objects = loadManifests(KUBERNETES_EXAMPLE);
  const job = findKind(objects, 'Job');
  const pod = job.spec.template!.spec;
  assert.equal(job.spec.completionMode, 'Indexed');
  assert.equal(job.spec.parallelism, job.spec.completions, 'every process runs at once');
  const service = findKind(objects, 'Service', pod.subdomain);
  assert.equal(service.spec.clusterIP, 'None', 'the Service is headless: names resolve to the pods');
  const labels = podLabels(job, 0);
  for (const [key, value] of Object.entries(service.spec.selector ?? {}))
    assert.equal(labels[key], value, `the Service selects the Job's pods (${key})`);
  const launch = podLaunch(job, 1, { namespace: NAMESPACE, secrets: SECRETS });
  assert.equal(launch.env.WORLD_SIZE, String(job.spec.completions));
  assert.equal(launch.env.RANK, '1');
  assert.equal(launch.env.PARATRAIN_SECRET, SECRET);
  const out = launch.argv[launch.argv.indexOf('--out') + 1]!;
  const mount = jobContainer(job).volumeMounts?.find((m) => out.startsWith(`${m.mountPath}/`));
  assert.ok(mount, `--out ${out} is on a mounted volume`);
  assert.ok(
    pod.volumes?.some((v) => v.name === mount.name),
    `the volume ${mount.name} is defined`,
  );
});

for (const n of [2, 3]) {
  test(`kubernetes.yaml: ${n} pods form one job of ${n} processes`, { timeout: 120_000 }, async () => {
    const volumes = join(dir, `k8s-${n}`);
    const runDir = join(volumes, 'runs', 'paratrain');
    checkJob(await runJob(kubernetesJob(n, volumes)), n, runDir);
    assertClose(weights(join(runDir, 'model.safetensors')), await reference(n), `kubernetes.yaml with ${n} pods`);
  });
}

// ---------------------------------------------------------------- Slurm

/** Each task's launch from `script` under an allocation of `nodes` nodes, on loopback. */
function slurmJob(script: string, nodes: number, runDir: string): ProcessLaunch[] {
  const options = sbatchOptions(readFileSync(script, 'utf8'));
  const jobId = 123456;
  const hosts = Array.from({ length: nodes }, (_, i) => `node${String(i + 1).padStart(2, '0')}`);
  const tasks = slurmTasks(
    script,
    {
      jobId,
      hosts,
      nodeList: `node[01-${String(nodes).padStart(2, '0')}]`,
      tasksPerNode: Number(options.get('ntasks-per-node') ?? 1),
      cpusPerTask: Number(options.get('cpus-per-task') ?? 1),
    },
    tmpDir('paratrain-slurm-'),
    { CONFIG: config, RUN_DIR: runDir },
  );
  const port = randomPort();
  return tasks.map((task) => {
    assert.equal(task.env.MASTER_ADDR, hosts[0], 'MASTER_ADDR is the first node');
    assert.equal(task.env.MASTER_PORT, String(29500 + (jobId % 1000)), 'MASTER_PORT follows the job id');
    assert.match(task.env.PARATRAIN_SECRET ?? '', /^[0-9a-f]{64}$/, 'a fresh secret of 32 random bytes');
    return onLoopback(task, port);
  });
}

test('slurm.sbatch: its #SBATCH header asks for 2 nodes of one task each', () => {
  const options = sbatchOptions(readFileSync(SLURM_EXAMPLE, 'utf8'));
  assert.equal(options.get('nodes'), '2');
  assert.equal(options.get('ntasks-per-node'), '1');
});

for (const n of [2, 3]) {
  test(`slurm.sbatch: ${n} tasks (sbatch --nodes=${n}) form one job of ${n} processes`, {
    timeout: 120_000,
  }, async () => {
    const runDir = join(dir, `slurm-${n}`);
    checkJob(await runJob(slurmJob(SLURM_EXAMPLE, n, runDir)), n, runDir);
    assertClose(weights(join(runDir, 'model.safetensors')), await reference(n), `slurm.sbatch with ${n} tasks`);
  });
}

// ---------------------------------------------------------------- self-check

test('self-check: a broken environment fails the check', { timeout: 120_000 }, async () => {
  // kubernetes.yaml with the rank variable misspelt: no process knows its rank
  const volumes = join(dir, 'k8s-broken');
  const misspelt = kubernetesJob(2, volumes, (objects) => {
    const rank = jobContainer(findKind(objects, 'Job')).env!.find((e) => e.name === 'RANK')!;
    rank.name = 'RANKS';
  });
  const k8sRun = join(volumes, 'runs', 'paratrain');
  await assert.rejects(async () => checkJob(await runJob(misspelt), 2, k8sRun), /WORLD_SIZE is set but RANK is not/);
  assert.ok(!existsSync(k8sRun));

  // slurm.sbatch reading a task's variables in the batch shell, where SLURM_PROCID is 0: every task is rank 0
  const script = join(dir, 'broken.sbatch');
  writeFileSync(
    script,
    readFileSync(SLURM_EXAMPLE, 'utf8').replace(/^srun /m, 'export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS\nsrun '),
  );
  const slurmRun = join(dir, 'slurm-broken');
  // both take process 0's part: one finds the rendezvous port, the run directory or its lock taken
  await assert.rejects(
    async () => checkJob(await runJob(slurmJob(script, 2, slurmRun)), 2, slurmRun),
    /process \d failed:[\s\S]*(EADDRINUSE|already holds files|is in use by another run)/,
  );
});
