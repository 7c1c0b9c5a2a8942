/**
 * Straggler distributions: the factor by which a device's forward + backward of one step is
 * slower than nominal (the runtime's --slow-device injects the same kind of factor, on
 * forward/backward only). Draws are a pure function of (seed, device, step) through the counter
 * RNG, so a simulation repeats exactly.
 *
 *   none                 every factor 1
 *   lognormal:σ          independent per device and step, log-normal with mean 1 (μ = −σ²/2)
 *   fixed:F@D            device D always F× slower (F ≥ 1); `fixed:2@0,1` slows devices 0 and 1
 *   run                  the --from run's own per-step compute, relative to its median (resampled)
 * joined with `+` to combine (the factors multiply): `lognormal:0.1+fixed:1.5@3`.
 */
import { CounterRng } from '../tensor/rng.ts';

/** One factor of a scenario. */
export type StragglerPart =
  | { kind: 'lognormal'; sigma: number }
  | { kind: 'fixed'; factor: number; devices: number[] }
  | { kind: 'run' };

/** A straggler scenario: its parts multiply. */
export interface Stragglers {
  /** as written, for tables and legends */
  name: string;
  parts: StragglerPart[];
}

/** Every device at nominal speed. */
export const NO_STRAGGLERS: Stragglers = { name: 'none', parts: [] };

const EXAMPLE = 'write e.g. none, lognormal:0.2, fixed:1.5@3, run or lognormal:0.1+fixed:2@0';

/** One scenario (`lognormal:0.2+fixed:1.5@3`). */
export function parseStragglers(text: string, flag = '--stragglers'): Stragglers {
  const name = text.trim();
  if (name === 'none' || name === '') return { ...NO_STRAGGLERS };
  const parts = name.split('+').map((p): StragglerPart => {
    const t = p.trim();
    if (t === 'run') return { kind: 'run' };
    let m = /^lognormal:([0-9.]+(?:e[-+]?\d+)?)$/i.exec(t);
    if (m) {
      const sigma = Number(m[1]);
      if (!(sigma >= 0 && sigma <= 5))
        throw new Error(`${flag}: lognormal σ must be between 0 and 5, got '${m[1]}'; ${EXAMPLE}`);
      return { kind: 'lognormal', sigma };
    }
    m = /^fixed:([0-9.]+)@([0-9,]+)$/i.exec(t);
    if (m) {
      const factor = Number(m[1]);
      const devices = m[2]!.split(',').filter(Boolean).map(Number);
      if (!(factor >= 1))
        throw new Error(`${flag}: a fixed straggler's factor must be ≥ 1 (1: normal speed), got '${m[1]}'; ${EXAMPLE}`);
      if (!devices.length || devices.some((d) => !Number.isInteger(d) || d < 0))
        throw new Error(`${flag}: '${t}' names no device; ${EXAMPLE}`);
      return { kind: 'fixed', factor, devices };
    }
    throw new Error(`${flag}: '${t}' is not a straggler distribution; ${EXAMPLE}`);
  });
  return { name, parts };
}

/** Scenarios separated by `;` or by commas between scenarios (`none,lognormal:0.2`); a fixed part's device list keeps its commas. */
export function parseStragglerList(text: string, flag = '--stragglers'): Stragglers[] {
  const items = text
    .split(/[;]|,(?=\s*(?:none|run|lognormal|fixed)\b)/i)
    .map((s) => s.trim())
    .filter(Boolean);
  return (items.length ? items : ['none']).map((s) => parseStragglers(s, flag));
}

/** The largest lognormal σ in a scenario (0 without one): the x axis of straggler sweeps. */
export function sigmaOf(s: Stragglers): number {
  return s.parts.reduce((m, p) => (p.kind === 'lognormal' ? Math.max(m, p.sigma) : m), 0);
}

/** Draws factor(device, step) for one scenario; `runFactors` backs the `run` part. */
export class StragglerSampler {
  private readonly rngs = new Map<number, CounterRng>();
  constructor(
    readonly scenario: Stragglers,
    private readonly seed: number,
    private readonly runFactors: readonly number[] = [],
  ) {
    if (scenario.parts.some((p) => p.kind === 'run') && !runFactors.length) {
      throw new Error(`--stragglers run replays a run's compute times: give the run with --from RUN_DIR`);
    }
  }

  get isConstant(): boolean {
    return this.scenario.parts.every((p) => p.kind === 'fixed');
  }

  private rng(device: number): CounterRng {
    let r = this.rngs.get(device);
    if (!r) {
      r = new CounterRng(this.seed, 0x57a6, device);
      this.rngs.set(device, r);
    }
    return r;
  }

  /** Factor of device `device` in step `step` (≥ 0; mean 1 for the random parts). */
  factor(device: number, step: number): number {
    let f = 1;
    for (const p of this.scenario.parts) {
      if (p.kind === 'fixed') {
        if (p.devices.includes(device)) f *= p.factor;
        continue;
      }
      const rng = this.rng(device);
      if (p.kind === 'lognormal') {
        if (p.sigma === 0) continue;
        const u1 = 1 - rng.at(4 * step),
          u2 = rng.at(4 * step + 1);
        const z = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
        f *= Math.exp(p.sigma * z - (p.sigma * p.sigma) / 2);
      } else {
        f *= this.runFactors[Math.floor(rng.at(4 * step + 2) * this.runFactors.length)]!;
      }
    }
    return f;
  }
}
