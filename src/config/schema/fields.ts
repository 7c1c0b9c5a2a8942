/**
 * The building blocks of the config schema: fields that carry their own human message ("expected a
 * positive integer"), strict maps whose unknown keys are named with the allowed ones, and one-key
 * maps (`conv2d: { ... }`, `adam: { lr: 0.001 }` or a bare name). errors.ts adds the file, the path
 * and the value received.
 */
import { z } from 'zod';
import { unknownKeyMessage, didYouMean, formatValue, type IssueParams } from '../errors.ts';
import type { OptionFields } from '../../parallel/strategies/index.ts';

// Fields: one check, one message.

export const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);
export const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

export function field<T>(check: (v: unknown) => boolean, expected: string) {
  return z.custom<T>((v) => check(v), { error: expected });
}

export const posInt = () => field<number>((v) => isInt(v) && v > 0, 'expected a positive integer');
export const nonNegInt = () => field<number>((v) => isInt(v) && v >= 0, 'expected an integer ≥ 0');
export const posNum = () => field<number>((v) => isNum(v) && v > 0, 'expected a positive number');
export const nonNegNum = () => field<number>((v) => isNum(v) && v >= 0, 'expected a number ≥ 0');
/** 0 ≤ v < 1 */
export const unitRange = () => field<number>((v) => isNum(v) && v >= 0 && v < 1, 'expected a number ≥ 0 and < 1');
/** 0 < v < 1 */
export const openUnit = () => field<number>((v) => isNum(v) && v > 0 && v < 1, 'expected a number > 0 and < 1');
/** 0 < v ≤ 1 */
export const factor = () => field<number>((v) => isNum(v) && v > 0 && v <= 1, 'expected a number > 0 and ≤ 1');
export const bool = () => field<boolean>((v) => typeof v === 'boolean', 'expected true or false');
export const str = (what: string) => field<string>((v) => typeof v === 'string' && v.length > 0, `expected ${what}`);
export const seedField = () =>
  field<number>((v) => isInt(v) && v >= 0 && v <= 0xffffffff, 'expected an integer from 0 to 4294967295');

export function oneOf<const T extends readonly string[]>(values: T) {
  return z.custom<T[number]>().superRefine((v, ctx) => {
    if (typeof v === 'string' && values.includes(v)) return;
    const hint = typeof v === 'string' ? didYouMean(v, values) : '';
    ctx.addIssue({
      code: 'custom',
      message: `expected one of ${values.join(', ')}`,
      params: { hint } satisfies IssueParams,
    });
  });
}

/** An integer or [h, w], normalised to [h, w]. */
export function size2(name: string) {
  return field<number | [number, number]>(
    (v) => (isInt(v) && v > 0) || (Array.isArray(v) && v.length === 2 && v.every((x) => isInt(x) && x > 0)),
    `expected a positive integer or [height, width] of positive integers for ${name}`,
  );
}
export const toPair = (v: number | [number, number]): [number, number] =>
  typeof v === 'number' ? [v, v] : [v[0], v[1]];

// ---------------------------------------------------------------------------------------------
// Strict maps: unknown keys are errors that name the key and the allowed ones.

/**
 * A map whose keys are all known. `noun` names the keys in messages ("option", "section"),
 * `owner` names the map when it takes no keys at all ("flatten takes no options").
 */
export function strict<S extends z.core.$ZodLooseShape>(shape: S, noun = 'option', owner?: string, example?: string) {
  const allowed = Object.keys(shape);
  return z.strictObject(shape, {
    error: (iss) => {
      if (iss.code === 'unrecognized_keys')
        return iss.keys.map((k) => unknownKeyMessage(k, allowed, noun, owner)).join('\n');
      if (iss.code === 'invalid_type') {
        return allowed.length
          ? `expected a map of ${noun}s (${allowed.join(', ')})${example ? ` such as ${example}` : ''}`
          : `expected {} (${owner ?? 'this'} takes no ${noun}s)`;
      }
      return undefined;
    },
  });
}

/** A section of the file that may be left out entirely (all its fields have defaults). */
export function section<S extends z.core.$ZodLooseShape>(shape: S) {
  const obj = strict(shape, 'option');
  // every field has a default, so {} is a valid input (TypeScript cannot see that for a generic shape)
  return obj.prefault({} as z.input<typeof obj>);
}

// ---------------------------------------------------------------------------------------------
// One-key maps: `conv2d: { ... }`, `adam: { lr: 0.001 }`, `bmuf: { period: 4 }`, or a bare name.

export interface OneKeyMapConfig<C extends Record<string, z.ZodType>> {
  /** what the key names, for messages: "layer type", "strategy", "optimizer" */
  noun: string;
  choices: C;
  /** a sample of the map form, for messages */
  example: string;
  /** why a name that is not a choice is refused here (a known layer in the wrong place), or undefined */
  refuse?: (name: string) => string | undefined;
}

/**
 * The declared input is what a one-key map accepts, for TypeScript users writing a config in code:
 * a bare name, or `{ name: options }` with that choice's own option types (so editors complete and
 * check them). Written out rather than as a named alias, so editors and the reference show the
 * resulting union (`'flatten' | { dense: { units: number; … } } | …`), not the schema's types.
 */
export function oneKeyMap<C extends Record<string, z.ZodType>>(
  cfg: OneKeyMapConfig<C>,
): z.ZodType<
  z.output<C[keyof C]>,
  { [K in keyof C & string]: K | { [P in K]: z.input<C[K]> | null } }[keyof C & string]
> {
  const names = Object.keys(cfg.choices);
  const list = names.join(', ');
  const fail = (ctx: z.core.$RefinementCtx, message: string) => {
    ctx.addIssue({ code: 'custom', message, params: { noGot: true } satisfies IssueParams });
    return z.NEVER;
  };
  return z.unknown().transform((v, ctx) => {
    let name: string;
    let opts: unknown;
    if (typeof v === 'string') {
      name = v;
      opts = {};
    } else if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      const keys = Object.keys(v);
      if (keys.length !== 1) {
        const hint =
          keys.length > 1 && keys.filter((k) => k in cfg.choices).length === 1
            ? ` (are the options of '${keys.find((k) => k in cfg.choices)}' indented under it?)`
            : '';
        return fail(
          ctx,
          `expected a one-key map naming the ${cfg.noun}, such as ${cfg.example}, got ${
            keys.length ? `${keys.length} keys (${keys.join(', ')})` : 'an empty map'
          }${hint}`,
        );
      }
      name = keys[0]!;
      opts = (v as Record<string, unknown>)[name];
      if (opts === undefined || opts === null) opts = {};
    } else {
      return fail(ctx, `expected a ${cfg.noun} name or a one-key map such as ${cfg.example}, got ${formatValue(v)}`);
    }
    const refused = Object.hasOwn(cfg.choices, name) ? undefined : cfg.refuse?.(name);
    if (refused) return fail(ctx, refused);
    if (!Object.hasOwn(cfg.choices, name)) {
      return fail(ctx, `unknown ${cfg.noun} ${formatValue(name)}${didYouMean(name, names)}; expected one of ${list}`);
    }
    const r = cfg.choices[name]!.safeParse(opts);
    if (!r.success) {
      for (const iss of r.error.issues) ctx.addIssue({ ...iss, path: [name, ...iss.path] } as z.core.$ZodRawIssue);
      return z.NEVER;
    }
    return r.data as z.output<C[keyof C]>;
    // the parse accepts any value (and says what is wrong with it); its declared input is what a config may hold
  }) as unknown as z.ZodType<
    z.output<C[keyof C]>,
    { [K in keyof C & string]: K | { [P in K]: z.input<C[K]> | null } }[keyof C & string]
  >;
}

/**
 * The fields a strategy's file builds its options schema from (parallel/strategies/entry.ts), but
 * the optimizer map, which train.ts adds (optimizer.ts builds on this file).
 */
export const optionFields: Omit<OptionFields, 'optimizer'> = {
  options: (shape, owner) => strict(shape, 'option', owner),
  posInt,
  nonNegInt,
  posNum,
  unitRange,
  openUnit,
  bool,
  oneOf,
};
