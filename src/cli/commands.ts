import { loadConfig, applyOverrides } from '../config/index.ts';
import { ProgressView } from './progress.ts';
import { train, type TrainOptions } from '../runtime/run/train.ts';
import { FaultPlan } from '../runtime/faults/faultPlan.ts';
import { describeGpu } from '../kernels/webgpu/describeGpu.ts';
import type { WebGpuBackend } from '../kernels/webgpu/index.ts';
import { backendUnavailableReason, getBackend, registeredBackends, tryBackend } from '../kernels/index.ts';
import { rendezvousFromEnv } from '../comm/rendezvous.ts';
import { shmReduceDescription } from '../comm/shm/nativeReduce.ts';
import { trainConfigPath } from '../runtime/run/resume.ts';
import { RunFinishedError } from '../runtime/run/runFinished.ts';
import { watchParent } from '../runtime/job/parentWatch.ts';
import { installStopSignals, STOP_EXIT_CODES } from './signals.ts';
import { stopLine } from './stopLine.ts';

export interface TrainFlags {
  epochs?: number;
  batchSize?: number;
  lr?: number;
  seed?: number;
  devices?: number;
  strategy?: string;
  backend?: string;
  data?: string;
  out?: string;
  force?: boolean;
  quiet?: boolean;
  slowDevice?: Map<number, number>;
  /** seconds: rendezvous and communication deadline between processes */
  timeout?: number;
  transport?: 'tcp' | 'mpi';
  resume?: string;
  initFrom?: string;
  /** 'mismatched' or comma-separated layer names */
  reinit?: string;
  /** comma-separated layer names */
  freeze?: string;
}

/** --init-from with --reinit and --freeze as train's initFrom option (the config's train.initFrom, field by field). */
function initFromOf(flags: TrainFlags): TrainOptions['initFrom'] {
  const extra = flags.reinit !== undefined ? '--reinit' : flags.freeze !== undefined ? '--freeze' : undefined;
  if (flags.initFrom === undefined) {
    if (extra)
      throw new Error(`${extra} goes with --init-from CHECKPOINT; give it too, or set train.initFrom in the config`);
    return undefined;
  }
  if (!extra) return flags.initFrom;
  const names = (v: string) => v.split(',').map((n) => n.trim());
  return {
    path: flags.initFrom,
    ...(flags.reinit !== undefined
      ? { reinit: flags.reinit === 'mismatched' ? 'mismatched' : names(flags.reinit) }
      : {}),
    ...(flags.freeze !== undefined ? { freeze: names(flags.freeze) } : {}),
  };
}

export async function runTrain(configPath: string | undefined, flags: TrainFlags): Promise<void> {
  const config = applyOverrides(loadConfig(trainConfigPath(configPath, flags.resume)), {
    epochs: flags.epochs,
    batchSize: flags.batchSize,
    lr: flags.lr,
    seed: flags.seed,
    devices: flags.devices,
    strategy: flags.strategy,
    backend: flags.backend,
    dataDir: flags.data,
  });
  // started by paratrain launch, torchrun, mpirun or srun: one process of a larger job
  const world = rendezvousFromEnv(process.env);
  const processes = world.worldSize > 1 ? world : undefined;
  // processes other than 0 train quietly: process 0 reports for the job
  const quiet = flags.quiet || (processes !== undefined && world.rank !== 0);
  const view = new ProgressView(process.stderr, quiet);
  const log = quiet ? () => {} : (m: string) => process.stderr.write(`${m}\n`);
  // fault injection for testing: stragglers from --slow-device, a failing device from PARATRAIN_FAIL_AT=RANK:STEP
  const faults = FaultPlan.fromCli({ slowDevice: flags.slowDevice, failAtEnv: process.env.PARATRAIN_FAIL_AT });
  faults.checkDevices(config.train.devices * world.worldSize);
  // Ctrl-C / SIGTERM stop at an agreed step with a checkpoint; a child of paratrain launch stops when the launcher is gone
  const stop = installStopSignals(process.stderr, quiet);
  const unwatch = watchParent(process.env, () => {
    stop.request('SIGTERM', 'the launcher is gone');
    setTimeout(() => process.exit(STOP_EXIT_CODES.SIGTERM), 10_000).unref();
  });
  try {
    const result = await train(config, {
      out: flags.out,
      force: flags.force,
      onEvent: view.handle,
      log,
      faults,
      resume: flags.resume,
      initFrom: initFromOf(flags),
      signal: stop.signal,
      command: ['paratrain', ...process.argv.slice(2)],
      processes,
      transport: flags.transport,
      timeoutMs: flags.timeout === undefined ? undefined : flags.timeout * 1000,
    }).catch((err: unknown) => {
      // nothing left to train is an outcome, not a failure: a retry loop around --resume ends
      if (!(err instanceof RunFinishedError)) throw err;
      process.stderr.write(`paratrain: ${err.message}\n`);
      process.stdout.write(
        `${JSON.stringify({ runDir: err.runDir, finished: { step: err.step, epoch: err.epoch } })}\n`,
      );
      return null;
    });
    if (!result) return;
    const summary =
      processes && world.rank !== 0
        ? {
            rank: world.rank,
            samplesPerSecond: Math.round(result.samplesPerSecond),
            seconds: Number(result.seconds.toFixed(1)),
          }
        : {
            runDir: result.runDir,
            testAccuracy: result.testAccuracy,
            ...(result.valAccuracy !== undefined ? { valAccuracy: result.valAccuracy } : {}),
            ...(result.testCER !== undefined ? { testCER: result.testCER, testWER: result.testWER } : {}),
            samplesPerSecond: Math.round(result.samplesPerSecond),
            seconds: Number(result.seconds.toFixed(1)),
          };
    const ended = {
      ...(result.stopped ? { stopped: result.stopped } : {}),
      ...(result.earlyStopped ? { earlyStopped: result.earlyStopped } : {}),
    };
    process.stdout.write(`${JSON.stringify({ ...summary, ...ended })}\n`);
    if (result.stopped) {
      const { step, epoch, signal } = result.stopped;
      view.stopBar();
      if (result.runDir) process.stderr.write(`${stopLine({ step, epoch, signal }, result.runDir)}\n`);
      process.exitCode = STOP_EXIT_CODES[signal] ?? 143;
    }
  } finally {
    unwatch();
    stop.dispose();
    view.stopBar();
  }
}

/** What a backend says about itself: the SIMD variant of wasm, the BLAS behind native, the ISA oneDNN dispatched. */
function backendDetail(backend: object | null): string {
  if (!backend) return '';
  const parts: string[] = [];
  if ('onednn' in backend && backend.onednn && typeof backend.onednn === 'object' && 'isa' in backend.onednn) {
    const o = backend.onednn as { version: string; isa: string; runtime: string; threads: number };
    parts.push(`oneDNN ${o.version}, ISA ${o.isa} (${o.runtime} runtime, ${o.threads} thread per device)`);
    if ('sequenceCells' in backend && typeof backend.sequenceCells === 'function') {
      // which recurrent layers run a direction as one oneDNN primitive (PARATRAIN_ONEDNN_RNN; AVX-512 only)
      const cells = (backend.sequenceCells as () => string[])();
      parts.push(
        `recurrent layers as oneDNN primitives: ${!o.isa.includes('avx512') ? 'none (no AVX-512: they step)' : cells.length ? cells.join(', ') : 'none (PARATRAIN_ONEDNN_RNN)'}`,
      );
    }
  }
  if ('gpu' in backend) parts.push(describeGpu((backend as WebGpuBackend).gpu.description));
  if ('relaxed' in backend)
    parts.push(
      `${'onednn' in backend ? 'other kernels: wasm ' : ''}${backend.relaxed ? 'relaxed SIMD (fused multiply-add)' : 'SIMD128'}`,
    );
  if ('blas' in backend && backend.blas && typeof backend.blas === 'object' && 'config' in backend.blas)
    parts.push(String(backend.blas.config));
  return parts.length ? ` — ${parts.join('; ')}` : '';
}

export async function runInfo(): Promise<void> {
  const chosen = await getBackend('auto');
  for (const name of registeredBackends()) {
    const backend = await tryBackend(name);
    const why = backend ? undefined : backendUnavailableReason(name);
    process.stdout.write(
      `${name.padEnd(8)} ${backend ? 'available' : `not available${why ? `: ${why}` : ''}`}${backendDetail(backend)}${backend === chosen ? '  (chosen by --backend auto)' : ''}\n`,
    );
  }
  process.stdout.write(`shm reduction (devices of one process): ${shmReduceDescription()}\n`);
  process.stdout.write(`node ${process.version}, ${(await import('node:os')).cpus().length} cores\n`);
}
