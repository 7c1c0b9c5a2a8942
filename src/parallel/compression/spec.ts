/**
 * `train.strategy.hybrid.compression`: a one-key map (or a bare name, for the defaults) choosing how
 * hybrid's gradients travel compressed — `oneBit`, or `powerSGD: { rank, startStep, warmStart,
 * minCompressionRate }`.
 */
import { z } from 'zod';
import type { OptionFields } from '../strategies/entry.ts';

export type CompressionSpec =
  | { type: 'oneBit' }
  | {
      type: 'powerSGD';
      /** the approximation's rank (per matrix at most min(rows, columns)) */
      rank: number;
      /** the global step from which gradients are compressed; plain all-reduce before it */
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
    oneBit: f.options({}, 'oneBit').transform((): CompressionSpec => ({ type: 'oneBit' })),
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
