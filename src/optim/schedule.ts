import type { ScheduleSpec } from './spec.ts';

/**
 * Learning rate at optimizer step `step` (0-based): linear warmup from baseLr/warmupSteps to
 * baseLr over the first warmupSteps steps, then the decay rule over the remaining steps.
 */
export function learningRateAt(step: number, baseLr: number, schedule: ScheduleSpec, totalSteps: number): number {
  const { warmupSteps, decay } = schedule;
  if (step < warmupSteps) return (baseLr * (step + 1)) / warmupSteps;
  const t = step - warmupSteps;
  switch (decay.type) {
    case 'none':
      return baseLr;
    case 'step':
      return baseLr * decay.gamma ** Math.floor(t / decay.every);
    case 'cosine': {
      const span = Math.max(totalSteps - warmupSteps, 1);
      const progress = Math.min(t / span, 1);
      return decay.minLr + (baseLr - decay.minLr) * 0.5 * (1 + Math.cos(Math.PI * progress));
    }
  }
}
