/**
 * A forward or backward pass over layers, written once for both ways of running it: a generator
 * that runs the layers in order and pauses (yields a Promise) only at a layer that communicates.
 * `runNow` drives it without any Promise (no layer communicates: the CPU step at full speed),
 * `runLater` awaits each pause (synchronised BatchNorm, a model-parallel section).
 */
import type { Layer } from './layer.ts';

/** A pass producing T that yields only where a layer communicates. */
export type Pass<T> = Generator<Promise<unknown>, T, unknown>;

/**
 * Whether a pass runs `layer` through forwardAsync/backwardAsync: only a pass that lets layers
 * communicate, and only for a layer that must (its plain forward/backward give the same numbers otherwise).
 */
export function communicates(layer: Layer, communicating: boolean): boolean {
  return communicating && layer.needsAsync === true;
}

/** Inside a pass: `yield* settle(p)` pauses the pass until p settles and gives p's value. */
export function* settle<T>(p: Promise<T>): Pass<T> {
  return (yield p) as T;
}

/** Runs a pass that lets no layer communicate to its end, synchronously. */
export function runNow<T>(pass: Pass<T>): T {
  const step = pass.next();
  if (!step.done) throw new Error('a layer that communicates ran in a synchronous pass: run the model asynchronously');
  return step.value;
}

/** Runs a pass, awaiting every layer that communicates. */
export async function runLater<T>(pass: Pass<T>): Promise<T> {
  let step = pass.next();
  while (!step.done) step = pass.next(await step.value);
  return step.value;
}
