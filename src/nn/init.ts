import { CounterRng } from '../tensor/rng.ts';
import type { ParamSpec } from './layer.ts';

/**
 * Fills one parameter according to its spec. Draws are keyed by (seed, parameter index), so every
 * replica built with the same seed starts identical, however the model is later split.
 */
export function initParam(spec: ParamSpec, out: Float32Array, seed: number, paramIndex: number): void {
  fill(spec, out, new CounterRng(seed, paramIndex, 0x1417));
  if (spec.initAdd) for (let i = spec.initAdd.start; i < spec.initAdd.end; i++) out[i] += spec.initAdd.value;
}

function fill(spec: ParamSpec, out: Float32Array, rng: CounterRng): void {
  switch (spec.init) {
    case 'zeros':
      out.fill(0);
      return;
    case 'ones':
      out.fill(1);
      return;
    case 'rnnUniform': {
      const limit = 1 / Math.sqrt(spec.fanOut);
      for (let i = 0; i < out.length; i++) out[i] = (rng.next() * 2 - 1) * limit;
      return;
    }
    case 'glorotUniform': {
      const limit = Math.sqrt(6 / (spec.fanIn + spec.fanOut));
      for (let i = 0; i < out.length; i++) out[i] = (rng.next() * 2 - 1) * limit;
      return;
    }
    case 'heNormal': {
      const std = Math.sqrt(2 / spec.fanIn);
      for (let i = 0; i < out.length; i++) out[i] = rng.normal() * std;
      return;
    }
    case 'normal': {
      const std = spec.std;
      if (std === undefined) throw new Error(`parameter ${spec.name}: init 'normal' needs its std`);
      for (let i = 0; i < out.length; i++) out[i] = rng.normal() * std;
      return;
    }
  }
}
