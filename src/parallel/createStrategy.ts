import type { Communicator } from '../comm/communicator.ts';
import type { ParameterServer } from './parameterServer/index.ts';
import type { StrategySpec } from './spec.ts';
import type { Strategy } from './strategy.ts';
import { hybridStrategy } from './hybrid.ts';
import { bspStrategy } from './bsp.ts';
import { bmufStrategy } from './bmuf.ts';
import { easgdSyncStrategy, easgdAsyncStrategy } from './easgd.ts';
import { asyncStrategy } from './async.ts';
import { syncStrategy } from './sync.ts';

/** Strategies whose weights live on a parameter server rather than in collectives. */
export function needsParameterServer(spec: StrategySpec): boolean {
  return spec.type === 'sync' || spec.type === 'async' || (spec.type === 'easgd' && spec.mode === 'async');
}

/** Strategies whose devices run every step together (collectives inside a step, e.g. synchronised BatchNorm, need it). */
export function stepsInLockstep(spec: StrategySpec): boolean {
  return spec.type === 'hybrid' || spec.type === 'bsp' || spec.type === 'bmuf' || (spec.type === 'easgd' && spec.mode === 'sync');
}

/** The error for synchronised BatchNorm with a strategy whose devices run at their own pace. */
export function syncBatchNormStrategyMessage(spec: StrategySpec): string {
  return `syncBatchNorm needs devices that step together (hybrid, bsp, bmuf, easgd with mode: sync); strategy ${spec.type} runs them at their own pace; use one of those or syncBatchNorm: false`;
}

/** BMUF's block momentum when the config leaves it out: η = 1 − 1/G (Chen & Huo). */
export function defaultBlockMomentum(devices: number): number {
  return 1 - 1 / devices;
}

/**
 * Checks the options that depend on the device count; errors name the config field and the fix.
 */
export function checkStrategy(spec: StrategySpec, devices: number): void {
  if (spec.type === 'easgd' && spec.mode === 'sync' && spec.alpha * devices >= 1) {
    throw new Error(`train.strategy.easgd.alpha: synchronous EASGD needs alpha·devices < 1 (the centre's moving rate), ` +
      `got ${spec.alpha}·${devices} = ${+(spec.alpha * devices).toFixed(4)}; use alpha < ${+(1 / devices).toFixed(4)}`);
  }
}

export interface StrategyContext {
  comm: Communicator;
  /** present when needsParameterServer(spec) */
  ps: ParameterServer | null;
}

export function createStrategy(spec: StrategySpec, ctx: StrategyContext): Strategy {
  const { comm } = ctx;
  checkStrategy(spec, comm.size);
  const ps = () => {
    if (!ctx.ps) throw new Error(`strategy ${spec.type} needs a parameter server`);
    return ctx.ps;
  };
  switch (spec.type) {
    case 'hybrid': return hybridStrategy(comm, spec.bucketBytes);
    case 'bsp': return bspStrategy(comm, spec.period);
    case 'bmuf': return bmufStrategy(comm, {
      period: spec.period, blockMomentum: spec.blockMomentum ?? defaultBlockMomentum(comm.size),
      blockLr: spec.blockLr, nesterov: spec.nesterov,
    });
    case 'easgd': return spec.mode === 'sync'
      ? easgdSyncStrategy(comm, spec.alpha, spec.period)
      : easgdAsyncStrategy(ps(), comm, spec.alpha, spec.period);
    case 'async': return asyncStrategy(ps(), comm, spec);
    case 'sync': return syncStrategy(ps(), comm);
  }
}
