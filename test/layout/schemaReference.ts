/**
 * Every field, choice and default a zod config schema accepts, read from the schema itself so that a
 * reference page can be checked against it (config-reference.test.ts).
 *
 * Plain zod (objects, wrappers, pipes, arrays, unions) is walked. Parts the walk cannot see into (a
 * transform over `z.unknown()`, such as the one-key maps `conv2d: { … }` or the `data:` section) are
 * probed: the schema is asked to parse `{ __probe: 1 }` there, and its own error names what it allows
 * (`unknown option '__probe'; allowed: filters, kernelSize, …` for a map, `unknown layer type
 * '__probe'; expected one of conv2d, …` for a one-key map; `… the options are …` for the speech
 * features). A message of neither shape where one is expected is reported as a problem, so the probe
 * cannot quietly find nothing. Defaults are a walked field's `.default()`/`.prefault()`, or what the
 * schema makes of a probed map given no options.
 *
 * Keys: a field is its dotted path from the root (`train.earlyStopping.patience`); the choices of a
 * one-key map start a key of their own (`conv2d`, `conv2d.filters`, `bmuf.period`), listed in the
 * table named after the map's noun (`layer`, `strategy`).
 */
import type { z } from 'zod';

export interface ReferenceEntry {
  /** `train.epochs`, `conv2d`, `conv2d.filters`, `csv.delimiter` */
  key: string;
  /** the table that documents it: `field`, or the family of the choice it belongs to (`layer`, `loss`, …) */
  table: string;
  /** set for a choice itself (`conv2d`): its family */
  choiceOf?: string;
  /** the default the schema fills in, when it is a number, string or boolean */
  default?: string | number | boolean;
  /** the row must name these (the dataset kinds that take a field not every kind takes) */
  mentions?: string[];
}

/** A map whose variants are picked by one of its keys (`data.dataset: csv`), each with fields of its own. */
export interface Variants {
  /** the key of the map, e.g. `data` */
  at: string;
  /** the field that picks the variant, e.g. `dataset` */
  key: string;
  values: readonly string[];
  /** the table of the fields only one variant has, e.g. `dataset` (rows `csv.delimiter`) */
  family: string;
}

export interface SchemaReference {
  entries: ReferenceEntry[];
  /** what could not be read; a non-empty list means the probe no longer understands the schema's messages */
  problems: string[];
}

interface Def {
  type: string;
  shape?: Record<string, z.ZodType>;
  in?: z.ZodType;
  out?: z.ZodType;
  innerType?: z.ZodType;
  element?: z.ZodType;
  options?: z.ZodType[];
  getter?: () => z.ZodType;
  defaultValue?: unknown;
}

const defOf = (s: z.ZodType) => (s as unknown as { _zod: { def: Def } })._zod.def;
const WRAPPERS = new Set(['optional', 'nullable', 'readonly', 'nonoptional', 'catch', 'default', 'prefault']);
const LEAVES = new Set(['string', 'number', 'boolean', 'bigint', 'enum', 'literal', 'null', 'date', 'nan']);
const PROBE = '__probe';
/** Values tried for a required option while reading the defaults of the others. */
const STAND_INS: unknown[] = [1, 0.5, [1, 1], 'x'];
const isPrimitive = (v: unknown): v is string | number | boolean =>
  typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
const join = (prefix: string, k: string) => (prefix ? `${prefix}.${k}` : k);

/** Whether the walk can see into `s` (false: a transform, `unknown` or `custom` that only a probe can read). */
function walkable(s: z.ZodType): boolean {
  const d = defOf(s);
  if (WRAPPERS.has(d.type)) return walkable(d.innerType!);
  if (d.type === 'pipe') return walkable(d.in!) || walkable(d.out!);
  return d.type === 'object' || d.type === 'array' || d.type === 'union' || d.type === 'lazy' || LEAVES.has(d.type);
}

/** The value a `.default()` or `.prefault()` fills in, looking through wrappers and a pipe's input. */
function defaultOf(s: z.ZodType): unknown {
  const d = defOf(s);
  if (d.type === 'default' || d.type === 'prefault') return d.defaultValue;
  if (WRAPPERS.has(d.type)) return defaultOf(d.innerType!);
  if (d.type === 'pipe') return defaultOf(d.in!);
  return undefined;
}

/** Where a probe puts its value: `wrap(v)` is the input of `schema` with v at the issue path `at`. */
interface Site {
  schema: z.ZodType;
  wrap: (v: unknown) => unknown;
  at: PropertyKey[];
}

type Shape = { kind: 'map'; keys: string[] } | { kind: 'choices'; noun: string; names: string[] } | { kind: 'leaf' };

const samePath = (a: readonly PropertyKey[], b: readonly PropertyKey[]) =>
  a.length === b.length && a.every((x, i) => x === b[i]);

/** Every field, choice and default of `schema`; `variants` names maps whose fields depend on one of their keys. */
export function collectReference(schema: z.ZodType, variants: readonly Variants[] = []): SchemaReference {
  const entries = new Map<string, ReferenceEntry>();
  const problems: string[] = [];
  const expanded = new Set<string>();
  const seenLazy = new Set<z.ZodType>();

  const add = (e: ReferenceEntry) => {
    const old = entries.get(`${e.table} ${e.key}`);
    if (!old) entries.set(`${e.table} ${e.key}`, e);
    else if (old.default === undefined && e.default !== undefined) old.default = e.default;
  };

  /** The shape of whatever sits at `site`: a map's keys, a one-key map's choices, or a leaf. */
  function shapeAt(site: Site, key: string): Shape {
    const r = site.schema.safeParse(site.wrap({ [PROBE]: 1 }));
    const issues = r.success ? [] : r.error.issues.filter((i) => samePath(i.path, site.at));
    for (const iss of issues) {
      if (iss.code === 'unrecognized_keys') {
        const first = iss.message.split('\n')[0]!;
        const allowed = /; allowed: (.+)$/.exec(first);
        if (allowed) return { kind: 'map', keys: allowed[1]!.split(', ') };
        if (/ takes no \w+s$/.test(first)) return { kind: 'map', keys: [] };
        problems.push(`${key}: an unknown key is refused with '${first}', which does not list the allowed keys`);
        return { kind: 'leaf' };
      }
      const choice = new RegExp(`^unknown (.+?) '${PROBE}'.*; expected one of (.+)$`).exec(iss.message);
      if (choice) return { kind: 'choices', noun: choice[1]!, names: choice[2]!.split(', ') };
      const options = /unknown option; the options are (.+)$/.exec(iss.message);
      if (options) return { kind: 'map', keys: options[1]!.split(', ') };
    }
    return { kind: 'leaf' };
  }

  /**
   * The defaults a map fills in, read from what the schema makes of it with no options: `build(o)` is
   * the input holding options `o` at issue path `optionsAt`. Required options get a stand-in (and are
   * not reported). Only for a map whose output is the site's own (a root map, or a root one-key map's
   * choice): a nested output's place need not be the input's.
   */
  function defaultsAt(
    site: Site,
    build: (o: Record<string, unknown>) => unknown,
    optionsAt: PropertyKey[],
    keys: readonly string[],
  ): Record<string, string | number | boolean> {
    if (site.at.length > 0) return {};
    const parse = (o: Record<string, unknown>) => site.schema.safeParse(site.wrap(build(o)));
    const issueAt = (r: ReturnType<typeof parse>, k: string) =>
      !r.success && r.error.issues.some((i) => samePath(i.path, [...optionsAt, k]));
    const filled: Record<string, unknown> = {};
    for (let round = 0; round <= keys.length; round++) {
      const r = parse(filled);
      if (r.success) {
        const out = (r.data ?? {}) as Record<string, unknown>;
        const found: Record<string, string | number | boolean> = {};
        for (const k of keys) if (!(k in filled) && isPrimitive(out[k])) found[k] = out[k];
        return found;
      }
      const missing = keys.find((k) => !(k in filled) && issueAt(r, k));
      const standIn =
        missing === undefined
          ? undefined
          : STAND_INS.find((x) => !issueAt(parse({ ...filled, [missing]: x }), missing));
      if (missing === undefined || standIn === undefined) return {};
      filled[missing] = standIn;
    }
    return {};
  }

  function probeMap(site: Site, key: string, table: string, keys: string[], depth: number) {
    const defaults = defaultsAt(site, (o) => o, [], keys);
    for (const k of keys) {
      add({ key: join(key, k), table, ...(k in defaults ? { default: defaults[k] } : {}) });
      probe(
        { schema: site.schema, wrap: (v) => site.wrap({ [k]: v }), at: [...site.at, k] },
        join(key, k),
        table,
        depth + 1,
      );
    }
  }

  /** The variants' fields: one a single variant takes (or that differs in shape between them) is `variant.field`. */
  function probeVariants(site: Site, key: string, v: Variants, depth: number) {
    const fieldSite = (value: string, k: string): Site => ({
      schema: site.schema,
      wrap: (x) => site.wrap({ [v.key]: value, [k]: x }),
      at: [...site.at, k],
    });
    const takers = new Map<string, { value: string; shape: string; default?: string | number | boolean }[]>();
    const byValue = new Map<string, string[]>();
    for (const value of v.values) {
      const shape = shapeAt({ ...site, wrap: (x) => site.wrap({ [v.key]: value, ...(x as object) }) }, key);
      if (shape.kind !== 'map') {
        problems.push(`${key}: the variant ${v.key}: ${value} is not read as a map of options`);
        continue;
      }
      byValue.set(value, shape.keys);
      const defaults = defaultsAt(site, (o) => ({ [v.key]: value, ...o }), [], shape.keys);
      for (const k of shape.keys) {
        const s = shapeAt(fieldSite(value, k), join(key, k));
        const taker = { value, shape: JSON.stringify(s), ...(k in defaults ? { default: defaults[k] } : {}) };
        takers.set(k, [...(takers.get(k) ?? []), taker]);
      }
    }
    const plain = defaultsAt(site, (o) => o, [], [v.key]);
    const done = new Set<string>();
    for (const [value, keys] of byValue) {
      add({ key: value, table: v.family, choiceOf: v.family });
      for (const k of keys) {
        const t = takers.get(k)!;
        const shared = t.length > 1 && t.every((x) => x.shape === t[0]!.shape);
        if (shared && done.has(k)) continue;
        done.add(k);
        const fieldKey = shared ? join(key, k) : join(value, k);
        const table = shared ? 'field' : v.family;
        const group = shared ? t : t.filter((x) => x.value === value);
        // a default the variants disagree on is not shown; the picker's is what a map without it gets
        const agreed = group.every((x) => x.default === group[0]!.default) ? group[0]!.default : undefined;
        const d = k === v.key ? plain[k] : agreed;
        const everyVariant = t.length === byValue.size;
        add({
          key: fieldKey,
          table,
          ...(d !== undefined ? { default: d } : {}),
          ...(shared && !everyVariant ? { mentions: t.map((x) => x.value) } : {}),
        });
        probe(fieldSite(value, k), fieldKey, table, depth + 1);
      }
    }
  }

  /** Reads what sits at `site` by probing; `key` and `table` name it in the reference. */
  function probe(site: Site, key: string, table: string, depth: number): void {
    if (depth > 12) {
      problems.push(`${key}: nested more than 12 levels deep; is the probe going round in a circle?`);
      return;
    }
    let shape = shapeAt(site, key);
    // a list: probe its first element (a list of lists: the first element's first element)
    for (let n = 0; shape.kind === 'leaf' && n < 2; n++) {
      const outer = site;
      site = { schema: outer.schema, wrap: (v) => outer.wrap([v]), at: [...outer.at, 0] };
      shape = shapeAt(site, key);
    }
    const variant = variants.find((v) => v.at === key);
    if (shape.kind === 'map' && variant) probeVariants(site, key, variant, depth);
    else if (shape.kind === 'map') probeMap(site, key, table, shape.keys, depth);
    else if (shape.kind === 'choices') probeChoices(site, shape.noun.replace(/ type$/, ''), shape.names, depth);
  }

  /** A one-key map's choices (`conv2d`) and their options (`conv2d.filters`), in the family's table. */
  function probeChoices(site: Site, family: string, names: readonly string[], depth: number): void {
    for (const name of names) {
      if (expanded.has(`${family}:${name}`)) continue;
      expanded.add(`${family}:${name}`);
      add({ key: name, table: family, choiceOf: family });
      const choiceSite: Site = { schema: site.schema, wrap: (v) => site.wrap({ [name]: v }), at: [...site.at, name] };
      const options = shapeAt(choiceSite, name);
      if (options.kind !== 'map') {
        problems.push(`${family} ${name}: its options are not read as a map`);
        continue;
      }
      const defaults = defaultsAt(site, (o) => ({ [name]: o }), [name], options.keys);
      for (const k of options.keys) {
        add({ key: join(name, k), table: family, ...(k in defaults ? { default: defaults[k] } : {}) });
        const optionSite: Site = {
          schema: site.schema,
          wrap: (v) => site.wrap({ [name]: { [k]: v } }),
          at: [...site.at, name, k],
        };
        probe(optionSite, join(name, k), family, depth + 1);
      }
    }
  }

  /** Walks plain zod; hands what it cannot see into to `probe`. */
  function walk(s: z.ZodType, key: string, table: string): void {
    const d = defOf(s);
    if (WRAPPERS.has(d.type)) walk(d.innerType!, key, table);
    else if (d.type === 'pipe') {
      if (walkable(d.in!)) walk(d.in!, key, table);
      else if (walkable(d.out!)) walk(d.out!, key, table);
      else probe({ schema: s, wrap: (v) => v, at: [] }, key, table, 0);
    } else if (d.type === 'object') {
      for (const [k, child] of Object.entries(d.shape!)) {
        const def = defaultOf(child);
        add({ key: join(key, k), table, ...(isPrimitive(def) ? { default: def } : {}) });
        walk(child, join(key, k), table);
      }
    } else if (d.type === 'array') walk(d.element!, key, table);
    else if (d.type === 'union') for (const o of d.options!) walk(o, key, table);
    else if (d.type === 'lazy') {
      const inner = d.getter!();
      if (seenLazy.has(inner)) return;
      seenLazy.add(inner);
      walk(inner, key, table);
    } else if (!LEAVES.has(d.type)) probe({ schema: s, wrap: (v) => v, at: [] }, key, table, 0);
  }

  walk(schema, '', 'field');
  return { entries: [...entries.values()], problems };
}
