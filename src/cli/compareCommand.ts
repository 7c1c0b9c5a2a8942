/**
 * `paratrain compare CONFIG --strategies a,b,… --devices G`: trains the same config with each
 * strategy (same data, seed and devices), one after another, each in its own process, into
 * `<out>/<label>/`; then writes `<out>/report.html` comparing them and prints a summary table.
 * A strategy may carry options as `paratrain simulate` takes them (`hybrid:shard=1`,
 * `hybrid:compression=oneBit`, `bmuf:period=8`), and `trick` and `pipeline:stages=2:microBatches=4`
 * train the model split as those name.
 */
import { fork } from 'node:child_process';
import { mkdirSync, readdirSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig, applyOverrides, parseConfig, toYamlForm, type RunConfig } from '../config/index.ts';
import { ProgressView } from './progress.ts';
import { STRATEGY_NAMES, checkStrategy } from '../parallel/strategies/index.ts';
import { parseStrategyChoice, type StrategyChoice } from '../simulate/choices.ts';
import { markForTrick } from '../simulate/trick.ts';
import { timestampName } from '../runtime/files/runDir.ts';
import type { TrainResult } from '../runtime/run/train.ts';
import { FaultPlan } from '../runtime/faults/faultPlan.ts';
import type { EventSink } from '../runtime/events/events.ts';
import { loadReportRuns, summaryTable, writeReport, REPORT_FILE } from '../report/index.ts';
import type { RunnerMessage, RunnerRequest } from './compareRunner.ts';

export interface CompareFlags {
  strategies?: string;
  devices?: number;
  epochs?: number;
  seed?: number;
  batchSize?: number;
  data?: string;
  out?: string;
  force?: boolean;
  quiet?: boolean;
  slowDevice?: Map<number, number>;
}

export const DEFAULT_COMPARE_STRATEGIES: readonly string[] = STRATEGY_NAMES;

/** `'hybrid, async'` → `['hybrid', 'async']`; an empty list or a repeated item is an error naming it. */
export function parseStrategies(list: string): string[] {
  const items = list
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (items.length === 0)
    throw new Error(
      `--strategies: expected a comma-separated list of strategies (${STRATEGY_NAMES.join(', ')}, with options as hybrid:shard=1), got '${list}'`,
    );
  const seen = new Set<string>();
  for (const item of items) {
    if (seen.has(item)) throw new Error(`--strategies: '${item}' is listed twice`);
    seen.add(item);
  }
  return items;
}

/** The run directory's name for a choice: `hybrid:shard=1` → `hybrid-shard-1`. */
export function runDirName(label: string): string {
  return label.replace(/[^A-Za-z0-9._-]+/g, '-');
}

/**
 * The config one choice trains: its strategy, and for `trick` every dense layer split, for a
 * pipeline train.pipeline and train.microBatches, for `tensor:size=g` the trick's layers split
 * with train.tensorParallel; checked whole by the schema on the job's devices.
 */
export function choiceConfig(base: RunConfig, choice: StrategyChoice): RunConfig {
  const model = choice.kind === 'trick' || choice.tensorParallel ? markForTrick(base.model) : base.model;
  const y = toYamlForm({ ...base, model, train: { ...base.train, strategy: choice.spec } }) as {
    train: Record<string, unknown>;
  };
  if (choice.pipeline) {
    const { stages, schedule, microBatches, boundaries } = choice.pipeline;
    y.train.pipeline = { stages, schedule, ...(boundaries ? { boundaries } : {}) };
    y.train.microBatches = microBatches;
  }
  if (choice.tensorParallel) y.train.tensorParallel = choice.tensorParallel;
  return parseConfig(y, `--strategies '${choice.label}'`);
}

export interface CompareResult {
  outDir: string;
  report: string;
  results: { strategy: string; result: TrainResult }[];
}

export async function runCompare(configPath: string, flags: CompareFlags): Promise<CompareResult> {
  const strategies = parseStrategies(flags.strategies ?? DEFAULT_COMPARE_STRATEGIES.join(','));
  const base = applyOverrides(loadConfig(configPath), {
    epochs: flags.epochs,
    devices: flags.devices,
    seed: flags.seed,
    batchSize: flags.batchSize,
    dataDir: flags.data,
  });
  const devices = base.train.devices;
  if (devices < 2) {
    throw new Error(
      `compare: the strategies differ only on 2 or more devices, and ${configPath} trains on ${devices}; pass --devices N with N ≥ 2`,
    );
  }
  const configs = strategies.map((item) => {
    const choice = parseStrategyChoice(item, base);
    try {
      const c = choiceConfig(base, choice);
      checkStrategy(c.train.strategy, devices);
      return c;
    } catch (e) {
      throw new Error(`compare: strategy ${item}: ${(e as Error).message}`);
    }
  });
  const dirs = strategies.map(runDirName);
  const clash = dirs.findIndex((d, i) => dirs.indexOf(d) !== i);
  if (clash >= 0)
    throw new Error(
      `--strategies: '${strategies[dirs.indexOf(dirs[clash]!)]}' and '${strategies[clash]}' would share the run directory ${dirs[clash]}; list one of them`,
    );
  const faults = FaultPlan.fromCli({ slowDevice: flags.slowDevice });
  faults.checkDevices(devices);
  const outDir = flags.out ?? join('runs', `compare-${timestampName()}`);
  prepareOutDir(outDir, Boolean(flags.force));

  const log = flags.quiet ? () => {} : (m: string) => process.stderr.write(`${m}\n`);
  const results: CompareResult['results'] = [];
  for (const [i, strategy] of strategies.entries()) {
    const dir = join(outDir, dirs[i]!);
    log(`[${i + 1}/${strategies.length}] ${strategy} on ${devices} devices → ${dir}`);
    const view = new ProgressView(process.stderr, flags.quiet, `${strategy}: `);
    try {
      // each run's command.txt names the comparison it is part of
      const command = ['paratrain', ...process.argv.slice(2)];
      const result = await trainInChild(
        { config: configs[i]!, out: dir, force: Boolean(flags.force), faults: faults.toData(), command },
        view.handle,
        log,
        strategy,
      );
      results.push({ strategy, result });
    } finally {
      view.stopBar();
    }
  }
  const runs = loadReportRuns(dirs.map((d) => join(outDir, d)));
  const report = writeReport(runs, {
    out: join(outDir, REPORT_FILE),
    force: true,
    title: `paratrain compare: ${strategies.join(', ')} on ${devices} devices`,
  });
  process.stdout.write(summaryTable(runs));
  process.stdout.write(`report: ${report}\n`);
  return { outDir, report, results };
}

/** Like a run directory: created if missing; one that holds files only with --force. */
function prepareOutDir(dir: string, force: boolean): void {
  let entries: string[] | null = null;
  try {
    if (!statSync(dir).isDirectory())
      throw new Error(`compare: ${dir} exists and is not a directory; choose another --out`);
    entries = readdirSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  if (entries && entries.length > 0 && !force) {
    throw new Error(
      `compare: ${dir} already holds files (${entries.slice(0, 5).join(', ')}${entries.length > 5 ? ', …' : ''}); choose another --out or pass --force to overwrite`,
    );
  }
  mkdirSync(dir, { recursive: true });
}

/** The runner module beside this one (.ts from source, .js when compiled) and how to start Node for it. */
function runnerCommand(): { path: string; execArgv: string[] } {
  const ext = extname(fileURLToPath(import.meta.url));
  const path = fileURLToPath(new URL(`./compareRunner${ext}`, import.meta.url));
  // keep loaders (tsx) and memory flags; not the test runner's or the inspector's
  const execArgv = process.execArgv.filter((a) => !/^--(test|inspect|watch)/.test(a));
  if (ext === '.ts' && !execArgv.some((a) => a.includes('tsx'))) execArgv.push('--import', 'tsx');
  return { path, execArgv };
}

function trainInChild(
  request: RunnerRequest,
  onEvent: EventSink,
  log: (m: string) => void,
  strategy: string,
): Promise<TrainResult> {
  const { path, execArgv } = runnerCommand();
  return new Promise((resolve, reject) => {
    const child = fork(path, [], {
      execArgv,
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let outcome: { result?: TrainResult; error?: Error } = {};
    child.on('message', (m: RunnerMessage) => {
      if (m.type === 'event') onEvent(m.event);
      // prefixed like the progress lines, so each note says which run it is about
      else if (m.type === 'log') log(`${strategy}: ${m.message}`);
      else if (m.type === 'result') outcome = { result: m.result };
      else if (m.type === 'error') {
        const err = new Error(`compare: strategy ${strategy} failed: ${m.message}`);
        if (m.stack) err.stack = `${err.message}\n(in the training process) ${m.stack}`;
        outcome = { error: err };
      }
    });
    child.on('error', (e) =>
      reject(new Error(`compare: cannot start the training process for ${strategy}: ${e.message}`)),
    );
    child.on('exit', (code, signal) => {
      if (outcome.error) reject(outcome.error);
      else if (outcome.result) resolve(outcome.result);
      else
        reject(
          new Error(
            `compare: the training process for ${strategy} ended (${signal ?? `exit code ${code}`}) without a result; its run directory is ${request.out}`,
          ),
        );
    });
    child.send(request satisfies RunnerRequest);
  });
}
