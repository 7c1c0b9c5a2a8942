/**
 * The simulator checked on real transport: 2–4 `paratrain train` processes, one per network
 * namespace, joined through a router namespace whose links are shaped (tbf rate) and delayed (a
 * user-space relay: this kernel has no netem; scripts/netns.ts, scripts/net-delay.py). For each
 * link and strategy it trains a few steps, measures the step time from process 0's metrics.jsonl
 * and prints it beside the simulator's prediction for the same run (its compute taken from the
 * run itself, `--from`, so only the communication is predicted) on the link as calibrated by a
 * probe (α from small-message round trips, β from a bulk transfer; scripts/link-probe.ts).
 *
 *   node --import tsx scripts/emulated-network.ts [--config examples/alexnet-small.yaml]
 *     [--links 1gbit:100us,100mbit:2ms] [--strategies hybrid,async,bsp,trick] [--processes 2]
 *     [--steps 30] [--mtu 9000] [--out DIR] [--json FILE]
 *
 * Needs root, iproute2 (`ip`, `tc`) and /usr/bin/python3; otherwise it says why and exits 0.
 * Everything it makes (namespaces, veths, the TUN device, the relay) is removed at the end, on an
 * error and on Ctrl-C. Run it on a quiet machine: the processes share its cores.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { loadConfig, configToYaml, type RunConfig } from '../src/config/index.ts';
import { parseLinks, formatRate, formatDuration, type Link } from '../src/simulate/units.ts';
import { parseStrategyChoices, type StrategyChoice } from '../src/simulate/choices.ts';
import { markForTrick, stripMarks } from '../src/simulate/trick.ts';
import { readRunMeasurements, median, mean } from '../src/simulate/fromRun.ts';
import { buildSetup } from '../src/simulate/setup.ts';
import { simulate } from '../src/simulate/simulate.ts';
import { EmulatedNetwork, namespacesUnavailable } from './netns.ts';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const MAIN = join(REPO, 'src', 'cli', 'main.ts');
const PROBE = join(REPO, 'scripts', 'link-probe.ts');
/** the shipped Fashion-MNIST subset's training images: runs stay within them */
const SUBSET_IMAGES = 4000;

function option(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : fallback;
}

/** Waits for a child to exit; kills it after `ms`. Resolves with its exit code (null: killed). */
function exited(child: ChildProcess, ms: number): Promise<number | null> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); }, ms);
    child.once('exit', (code) => { clearTimeout(timer); resolve(code); });
  });
}

/** The run's config for one strategy: its model as that strategy runs it, one device per process, about `steps` steps. */
function jobConfig(base: RunConfig, choice: StrategyChoice, processes: number, steps: number): RunConfig {
  const global = base.data.batchSizeScope === 'global' ? base.data.batchSize : base.data.batchSize * processes;
  const samples = Math.min(steps * global, SUBSET_IMAGES);
  return {
    ...base,
    model: choice.kind === 'trick' ? markForTrick(base.model) : stripMarks(base.model),
    data: { ...base.data, trainLimit: samples, testLimit: 100 },
    train: { ...base.train, devices: 1, epochs: Math.max(1, Math.ceil((steps * global) / samples)), strategy: choice.spec },
  };
}

interface Calibration { alpha: number; beta: number; rttMs: number }

/** α and β of the shaped link, measured from host 0 to host 1 and back at once (link-probe.ts). */
async function calibrate(net: EmulatedNetwork, link: Link): Promise<Calibration> {
  const env = { ...process.env };
  const server = net.spawnIn(1, [process.execPath, '--import', 'tsx', PROBE, 'serve', '29499'], env);
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('link probe server did not start')), 60_000);
      server.stdout!.once('data', () => { clearTimeout(timer); resolve(); });
    });
    const bytes = Math.min(64 << 20, Math.max(1 << 20, Math.round(link.beta * 1.5)));
    const client = net.spawnIn(0, [process.execPath, '--import', 'tsx', PROBE, 'probe', net.address(1), '29499', String(bytes)], env);
    let out = '', err = '';
    client.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
    client.stderr!.on('data', (d: Buffer) => { err = (err + d.toString()).slice(-1000); });
    const code = await exited(client, 90_000);
    if (code !== 0) throw new Error(`the link probe from ${net.host(0)} to ${net.host(1)} failed (exit ${code}): ${err.trim().split('\n').slice(-2).join(' | ') || 'no output'}`);
    return JSON.parse(out.trim().split('\n').pop()!) as Calibration;
  } finally {
    server.kill('SIGKILL');
  }
}

/** Runs one job of `processes` processes; returns an error text, or null when every process succeeded. */
async function runJob(net: EmulatedNetwork, configPath: string, runDir: string, processes: number, children: Set<ChildProcess>): Promise<string | null> {
  const env = {
    ...process.env, WORLD_SIZE: String(processes), LOCAL_RANK: '0', MASTER_ADDR: net.address(0), MASTER_PORT: '29500',
    PARATRAIN_SECRET: randomBytes(32).toString('hex'), PARATRAIN_OFFLINE: '1',
  };
  const procs = Array.from({ length: processes }, (_, p) => {
    const child = net.spawnIn(p, [process.execPath, '--import', 'tsx', MAIN, 'train', configPath, '--devices', '1', '--out', runDir, '--force', '--quiet', '--timeout', '120'],
      { ...env, RANK: String(p) });
    children.add(child);
    let err = '';
    child.stderr!.on('data', (d: Buffer) => { err = (err + d.toString()).slice(-2000); });
    child.stdout!.resume();
    return { child, err: () => err };
  });
  const codes = await Promise.all(procs.map((p) => exited(p.child, 15 * 60_000)));
  for (const p of procs) children.delete(p.child);
  const bad = codes.findIndex((c) => c !== 0);
  return bad < 0 ? null : `process ${bad} exited with ${codes[bad]}: ${procs[bad]!.err().trim().split('\n').slice(-3).join(' | ')}`;
}

interface Row { link: string; strategy: string; measuredMs: number; predictedMs: number; nominalMs: number; error: number; bytesMeasured: number; bytesPredicted: number; note?: string }

export async function main(args: string[]): Promise<void> {
  const why = namespacesUnavailable();
  if (why) {
    console.log(`emulated-network: skipped: network namespaces cannot be made here: ${why}`);
    return;
  }
  const configPath = option(args, 'config', join(REPO, 'examples', 'alexnet-small.yaml'));
  const links = parseLinks(option(args, 'links', '1gbit:100us,100mbit:2ms'), '--links');
  const processes = Number(option(args, 'processes', '2'));
  if (!(processes >= 2 && processes <= 4 && Number.isInteger(processes))) throw new Error('--processes: 2, 3 or 4');
  const steps = Number(option(args, 'steps', '30'));
  const base = loadConfig(configPath);
  const choices = parseStrategyChoices(option(args, 'strategies', 'hybrid,async,bsp,trick'), base);
  const keep = args.includes('--out');
  const out = keep ? option(args, 'out', '') : mkdtempSync(join(tmpdir(), 'paratrain-emulated-'));
  mkdirSync(out, { recursive: true });
  const net = new EmulatedNetwork(processes, Number(option(args, 'mtu', '9000')));
  const children = new Set<ChildProcess>();
  const rows: Row[] = [];
  const cleanup = async () => {
    for (const c of children) c.kill('SIGKILL');
    await net.destroy();
    if (!keep) rmSync(out, { recursive: true, force: true });
  };
  const onSignal = () => { void cleanup().finally(() => process.exit(130)); };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    net.create();
    for (const link of links) {
      await net.shape({ rate: link.beta, delay: link.alpha }, 4 * 3600);
      const cal = await calibrate(net, link);
      console.log(`\nlink ${link.name}: measured ${formatRate(cal.beta)}, one-way ${formatDuration(cal.alpha)} (round trip ${cal.rttMs.toFixed(2)} ms); ${processes} processes, one device each`);
      console.log(`${'strategy'.padEnd(10)}${'measured ms'.padStart(13)}${'predicted ms'.padStart(14)}${'error'.padStart(8)}${'nominal-link ms'.padStart(17)}${'MB/step measured'.padStart(18)}${'predicted'.padStart(11)}`);
      for (const choice of choices) {
        const dir = join(out, `${link.name.replace(/[^a-z0-9]+/gi, '_')}-${choice.label.replace(/[^a-z0-9]+/gi, '_')}`);
        const cfg = join(out, `${choice.label.replace(/[^a-z0-9]+/gi, '_')}.yaml`);
        writeFileSync(cfg, configToYaml(jobConfig(base, choice, processes, steps)));
        const failure = await runJob(net, cfg, dir, processes, children);
        if (failure) {
          console.log(`${choice.label.padEnd(10)}  failed: ${failure}`);
          continue;
        }
        const measured = readRunMeasurements(dir);
        const predict = async (l: Link) => {
          // the run's own compute, and its variation step to step (lockstep devices wait for the slower one)
          const { setup } = await buildSetup(cfg, { from: dir, devices: String(processes), strategies: choice.label, perHost: 1, link: `${l.beta * 8}bit:${l.alpha}s`, stragglers: 'run' });
          return simulate(setup)[0]!;
        };
        const cal1 = await predict({ name: 'calibrated', alpha: cal.alpha, beta: cal.beta });
        const nominal = await predict(link);
        // process 0's device is what metrics.jsonl holds (with a parameter server, the one beside it)
        const device0 = (r: typeof cal1) => r.deviceStepSeconds?.[0] ?? r.stepSeconds;
        const row: Row = {
          link: link.name, strategy: choice.label, measuredMs: mean(measured.step) * 1000, predictedMs: device0(cal1) * 1000, nominalMs: device0(nominal) * 1000,
          error: device0(cal1) / mean(measured.step) - 1, bytesMeasured: median(measured.bytes), bytesPredicted: cal1.bytesPerStep,
        };
        rows.push(row);
        console.log(`${row.strategy.padEnd(10)}${row.measuredMs.toFixed(1).padStart(13)}${row.predictedMs.toFixed(1).padStart(14)}${`${(100 * row.error).toFixed(1)}%`.padStart(8)}` +
          `${row.nominalMs.toFixed(1).padStart(17)}${(row.bytesMeasured / 1e6).toFixed(2).padStart(18)}${(row.bytesPredicted / 1e6).toFixed(2).padStart(11)}`);
      }
    }
    const json = option(args, 'json', '');
    if (json) writeFileSync(json, JSON.stringify({ config: configPath, processes, steps, rows }, null, 1));
    console.log(`\nmeasured: mean (compute + sync) per step of process 0's device after the warm-up steps; predicted: the simulator with that run's ` +
      `compute (its median, varied step to step as in the run: --stragglers run) on the calibrated link; nominal: the same on the link as given` +
      (keep ? `; runs kept in ${out}` : ''));
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await cleanup();
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main(process.argv.slice(2));
