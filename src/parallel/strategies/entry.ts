/**
 * What a strategy's file provides to the registry (index.ts): the schema of its config options,
 * what it needs from the run, the checks that depend on the device count, and its factory.
 */
import type { z } from 'zod';
import type { Communicator } from '../../comm/communicator.ts';
import type { OptimizerSpec } from '../../optim/spec.ts';
import type { ParameterServer } from '../parameterServer/index.ts';
import type { Strategy } from '../strategy.ts';

/**
 * The config schema's field builders, handed in by src/config so that a strategy's options carry the
 * same messages as every other field ("expected a positive integer") without parallel/ importing config/.
 */
export interface OptionFields {
  /** the strategy's options map: an unknown key is an error naming the allowed ones; `owner` names a map that takes none */
  options<S extends z.core.$ZodLooseShape>(shape: S, owner?: string): z.ZodObject<S, z.core.$strict>;
  posInt(): z.ZodType<number>;
  nonNegInt(): z.ZodType<number>;
  posNum(): z.ZodType<number>;
  /** 0 ≤ v < 1 */
  unitRange(): z.ZodType<number>;
  /** 0 < v < 1 */
  openUnit(): z.ZodType<number>;
  bool(): z.ZodType<boolean>;
  oneOf<const T extends readonly string[]>(values: T): z.ZodType<T[number]>;
  /** an optimizer written as the config's `optimizer:` is (`sgd: { lr: 0.7, momentum: 0.9 }`), normalised */
  optimizer(): z.ZodType<OptimizerSpec>;
}

export interface StrategyContext {
  comm: Communicator;
  /** present when the strategy's `needsParameterServer(spec)` */
  ps: ParameterServer | null;
  /** train.seed: what a strategy draws must be the same on every device (powerSGD's Q); absent: 0 */
  seed?: number;
}

/** The parameter server of `ctx`, which a parameter-server strategy cannot do without. */
export function requireParameterServer(ctx: StrategyContext, strategy: string): ParameterServer {
  if (!ctx.ps) throw new Error(`strategy ${strategy} needs a parameter server`);
  return ctx.ps;
}

/** One strategy: `S` is its normalised spec (`{ type: name, ...options }`). */
export interface StrategyEntry<S extends { type: string }> {
  readonly name: S['type'];
  /** `train.strategy.<name>`'s options (a bare name means `{}`) → the spec, defaults filled in */
  schema(f: OptionFields): z.ZodType<S>;
  /** the weights live on a parameter server rather than in collectives */
  needsParameterServer(spec: S): boolean;
  /**
   * Whether the devices run every step together (collectives inside a step, e.g. synchronised
   * BatchNorm, need it): always, never, or only `when` an option says so (`mode: sync`).
   */
  readonly lockstep: boolean | { readonly when: string; test(spec: S): boolean };
  /**
   * A device that dies leaves the others going: the server drops it and the run ends normally
   * (asynchronous parameter-server rules, whose devices never wait for each other). Absent: false.
   */
  survivesLostDevices?(spec: S): boolean;
  /** can run model-parallel layers, whose activations are exchanged every step in lockstep with the other layers' gradient all-reduce */
  readonly modelParallel?: boolean;
  /** checks the options that depend on the device count; errors name the config field and the fix */
  check?(spec: S, devices: number): void;
  /** the hooks one device runs */
  create(spec: S, ctx: StrategyContext): Strategy;
}
