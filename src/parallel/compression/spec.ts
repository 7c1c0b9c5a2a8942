/**
 * `train.strategy.<hybrid|bsp|bmuf|diloco>.compression`: a one-key map (or a bare name, for the
 * defaults) choosing how hybrid's gradients, or the averaging strategies' model deltas, travel
 * compressed — `oneBit: { startStep }`, or `powerSGD: { rank, startStep, warmStart, minCompressionRate }`.
 */
import { z } from 'zod';
import type { OptionFields } from '../strategies/entry.ts';

export type CompressionSpec =
  | {
      type: 'oneBit';
      /** as powerSGD's (absent: 0): 1-bit Adam likewise warms Adam's moments up on plain gradients first */
      startStep?: number;
      /**
       * 1-bit Adam (hybrid with adam/adamw): from startStep Adam's variance stays as the plain steps
       * left it, so the update is linear in the compressed gradient (absent: false)
       */
      freezeVariance?: boolean;
    }
  | {
      type: 'powerSGD';
      /** the approximation's rank (per matrix at most min(rows, columns)) */
      rank: number;
      /** the global step from which gradients (deltas) are compressed; plain all-reduce before it */
      startStep: number;
      /** reuse each step's Q as the next one's start */
      warmStart: boolean;
      /** a matrix is compressed only when that shrinks it more than this many times */
      minCompressionRate: number;
    };

export const COMPRESSION_NAMES = ['oneBit', 'powerSGD'] as const;

/** The schema of `compression`: its messages have the shape of every other one-key map of the config. */
export function compressionSchema(f: OptionFields): z.ZodType<CompressionSpec> {
  const choices: Record<(typeof COMPRESSION_NAMES)[number], z.ZodType<CompressionSpec>> = {
    oneBit: f
      .options({ startStep: f.nonNegInt().default(0), freezeVariance: f.bool().default(false) }, 'oneBit')
      .refine((o) => !o.freezeVariance || o.startStep >= 1, {
        path: ['freezeVariance'],
        message:
          "freezeVariance freezes the variance that Adam's plain steps before startStep estimate, so it needs startStep of at least 1 (e.g. startStep: 1000)",
        params: { noGot: true },
      })
      .transform(
        (o): CompressionSpec => ({
          type: 'oneBit',
          ...(o.startStep ? { startStep: o.startStep } : {}),
          ...(o.freezeVariance ? { freezeVariance: true } : {}),
        }),
      ),
    powerSGD: f
      .options({
        rank: f.posInt().default(4),
        startStep: f.nonNegInt().default(0),
        warmStart: f.bool().default(true),
        minCompressionRate: f.posNum().default(2),
      })
      .transform((o): CompressionSpec => ({ type: 'powerSGD', ...o })),
  };
  const list = COMPRESSION_NAMES.join(', ');
  const fail = (ctx: z.core.$RefinementCtx, message: string) => {
    // the message shows the value itself: the config's formatter adds no "got …"
    ctx.addIssue({ code: 'custom', message, params: { noGot: true } });
    return z.NEVER;
  };
  return z.unknown().transform((v, ctx): CompressionSpec => {
    let name: string,
      opts: unknown = {};
    if (typeof v === 'string') name = v;
    else if (v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 1) {
      name = Object.keys(v)[0]!;
      opts = (v as Record<string, unknown>)[name] ?? {};
    } else
      return fail(
        ctx,
        `expected a compression name or a one-key map such as 'powerSGD: { rank: 4 }', got ${JSON.stringify(v)}`,
      );
    if (!Object.hasOwn(choices, name)) return fail(ctx, `unknown compression '${name}'; expected one of ${list}`);
    const r = choices[name as keyof typeof choices].safeParse(opts);
    if (r.success) return r.data;
    for (const iss of r.error.issues) ctx.addIssue({ ...iss, path: [name, ...iss.path] } as z.core.$ZodRawIssue);
    return z.NEVER;
  }) as unknown as z.ZodType<CompressionSpec>;
}

/** The global step from which `spec` compresses; every step before it is the plain exchange's, bit for bit. */
export const compressionStartStep = (spec: CompressionSpec): number => spec.startStep ?? 0;

/**
 * oneBit's freezeVariance beside the rest of the config (null: fine): it freezes Adam's variance
 * under hybrid's compressed gradients, so it needs hybrid and an adam/adamw optimizer.
 */
export function freezeVarianceIssue(
  strategy: { type: string; compression?: CompressionSpec },
  optimizer: string,
): { path: string[]; message: string } | null {
  const c = strategy.compression;
  if (c?.type !== 'oneBit' || !c.freezeVariance) return null;
  const path = ['train', 'strategy', strategy.type, 'compression', 'oneBit', 'freezeVariance'];
  if (strategy.type !== 'hybrid')
    return {
      path,
      message: `freezeVariance freezes Adam's variance under hybrid's compressed gradients; ${strategy.type} compresses model deltas, so leave it out (or use strategy hybrid)`,
    };
  if (optimizer !== 'adam' && optimizer !== 'adamw')
    return {
      path,
      message: `freezeVariance freezes Adam's variance (1-bit Adam), but the optimizer is ${optimizer}; use optimizer adam or adamw, or leave freezeVariance out`,
    };
  return null;
}
