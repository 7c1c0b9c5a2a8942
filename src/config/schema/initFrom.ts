/**
 * `train.initFrom`: a new run starts from a checkpoint's weights (fine-tuning). A path, or
 * `{ path, reinit, freeze }`: `reinit` names the layers that start from the model's own
 * initialisation instead (`mismatched`: every layer whose shapes differ from the checkpoint's),
 * `freeze` the layers whose weights training leaves bit for bit as they are. A layer is named
 * `layers.N`, N its index in model.layers (the prefix of its tensors in a checkpoint); which names
 * the model has is checked when the run starts (runtime/checkpoint/initFrom.ts).
 */
import { z } from 'zod';
import type { InitFromSpec } from '../runConfig.ts';
import { field, str, strict } from './fields.ts';

/** `layers.N`: model.layers[N]. */
export const LAYER_NAME = /^layers\.(0|[1-9]\d*)$/;

const LIST = 'a list of layer names such as [layers.0, layers.2] (layers.N is model.layers[N])';
const isNameList = (v: unknown): v is string[] =>
  Array.isArray(v) && v.every((x) => typeof x === 'string' && LAYER_NAME.test(x));
/** Each name once, in the order given. */
const unique = (names: readonly string[]) => [...new Set(names)];

const initFromSchema = strict(
  {
    path: str('the path of a model checkpoint, e.g. runs/base/model.safetensors'),
    reinit: field<'mismatched' | string[]>(
      (v) => v === 'mismatched' || isNameList(v),
      `expected mismatched or ${LIST}`,
    ).default([]),
    freeze: field<string[]>(isNameList, `expected ${LIST}`).default([]),
  },
  'option',
  undefined,
  '`{ path: runs/base/model.safetensors, reinit: mismatched, freeze: [layers.0] }`',
);

/** What `train.initFrom` accepts when written in code or YAML. */
export type InitFromInput =
  | string
  | {
      path: string;
      /** `mismatched`, or layer names (`layers.N`) that start from the model's fresh initialisation */
      reinit?: 'mismatched' | string[];
      /** layer names (`layers.N`) whose weights training does not change */
      freeze?: string[];
    };

/** `value` (a path or `{ path, reinit, freeze }`) normalised, or the problems with it. */
export function parseInitFrom(
  value: unknown,
): { spec: InitFromSpec; issues?: undefined } | { spec?: undefined; issues: z.core.$ZodIssue[] } {
  if (typeof value !== 'string' && (value === null || typeof value !== 'object' || Array.isArray(value))) {
    const issue = {
      code: 'custom',
      path: [],
      input: value,
      message: 'expected a checkpoint path or { path, reinit, freeze }',
    };
    return { issues: [issue as z.core.$ZodIssue] };
  }
  const r = initFromSchema.safeParse(typeof value === 'string' ? { path: value } : value);
  if (!r.success) return { issues: r.error.issues };
  const { path, reinit, freeze } = r.data;
  return { spec: { path, reinit: reinit === 'mismatched' ? reinit : unique(reinit), freeze: unique(freeze) } };
}

/** `train.initFrom`: absent (a fresh start), a checkpoint path, or `{ path, reinit, freeze }`. */
export function initFromField() {
  const spec = z.unknown().transform((v, ctx): InitFromSpec => {
    const r = parseInitFrom(v);
    if (r.issues) {
      for (const iss of r.issues) ctx.addIssue(iss as z.core.$ZodRawIssue);
      return z.NEVER;
    }
    return r.spec;
    // the parse accepts any value (and says what is wrong with it); its declared input is what a config may hold
  }) as unknown as z.ZodType<InitFromSpec, InitFromInput>;
  return spec.optional();
}
