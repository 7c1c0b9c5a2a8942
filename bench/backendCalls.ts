/**
 * Where a pass goes, by Backend method (`--calls` of `bench lstm` and `bench train`): a view of a
 * backend whose every method is wrapped with a wall-clock timer (the outermost call only, so a
 * method that calls another counts once), and a report of ms per pass in each method and what is
 * left outside them (the layers' own JavaScript). On a GPU backend (`device`) a method only records
 * its kernels: the GPU runs them at the pass's read, whose wait counts outside the calls.
 */
import type { Backend } from '../src/kernels/backend.ts';

export interface CallTimer {
  /** the backend to build the model on: `b` with every method timed */
  backend: Backend;
  /** forgets what was counted (after a warm-up) */
  reset(): void;
  /** lines of ms per pass in each method (largest first), then outside them, given the passes' total wall-clock ms; `unit` names a pass */
  report(passes: number, totalMs: number, unit?: string): string[];
}

export function timeCalls(b: Backend): CallTimer {
  const timed = Object.create(b) as Backend & Record<string, unknown>;
  const spent = new Map<string, { ms: number; calls: number }>();
  let depth = 0;
  for (let o: object | null = b; o && o !== Object.prototype; o = Object.getPrototypeOf(o) as object | null) {
    for (const key of Object.getOwnPropertyNames(o)) {
      const f = (b as unknown as Record<string, unknown>)[key];
      if (typeof f !== 'function' || key === 'constructor' || key === 'alloc' || Object.hasOwn(timed, key)) continue;
      timed[key] = (...args: unknown[]) => {
        if (depth > 0) return f.apply(b, args);
        depth++;
        const t0 = performance.now();
        try {
          return f.apply(b, args);
        } finally {
          depth--;
          const e = spent.get(key) ?? { ms: 0, calls: 0 };
          e.ms += performance.now() - t0;
          e.calls++;
          spent.set(key, e);
        }
      };
    }
  }
  return {
    backend: timed,
    reset: () => spent.clear(),
    report(passes, totalMs, unit = 'pass') {
      const rows = [...spent.entries()].sort((a, c) => c[1].ms - a[1].ms);
      const inside = rows.reduce((a, [, e]) => a + e.ms / passes, 0);
      const perPass = totalMs / passes;
      return [
        ...rows.map(([key, e]) => `  ${(e.ms / passes).toFixed(2).padStart(8)} ms  ${key} (${e.calls / passes} calls)`),
        `  ${(perPass - inside).toFixed(2).padStart(8)} ms  outside the backend's calls`,
        `  ${perPass.toFixed(2).padStart(8)} ms  the ${unit} (wall clock, mean of ${passes})`,
        ...(b.device
          ? [
              `  (${b.name}: a method's time records its kernels; the GPU runs them at the ${unit}'s read, outside the calls)`,
            ]
          : []),
      ];
    },
  };
}
