/**
 * Turning config problems into messages for people: one line per problem,
 * `<file>: <path>: <what is wrong>, got <value>`.
 */
import type { z } from 'zod';

/** A config that cannot be used. `issues` holds one line per problem; the message lists them all. */
export class ConfigError extends Error {
  readonly issues: string[];

  /** `detail` (e.g. the source line of a YAML syntax error) is appended to the message, not to `issues`. */
  constructor(issues: string[], detail?: string) {
    super(issues.join('\n') + (detail ? `\n${detail}` : ''));
    this.name = 'ConfigError';
    this.issues = issues;
  }
}

/**
 * Extra data our own issues carry in zod's `params`:
 * - `noGot`: the message already shows the value (or there is none worth showing)
 * - `hint`: appended after the value: ` (did you mean 'relu'?)`
 */
export interface IssueParams {
  noGot?: boolean;
  hint?: string;
}

/** `model.layers[3].conv2d.kernelSize` */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else {
      const s = String(seg);
      if (/^[A-Za-z_$][\w$-]*$/.test(s)) out += out ? `.${s}` : s;
      else out += `[${quote(s)}]`;
    }
  }
  return out;
}

function quote(s: string): string {
  return s.includes("'") ? JSON.stringify(s) : `'${s}'`;
}

/** A short, YAML-ish rendering of a received value: `-1`, `'conv3d'`, `[3, -1]`, `{ filters: 32 }`. */
export function formatValue(v: unknown, max = 80): string {
  const s = render(v, 0);
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

function render(v: unknown, depth: number): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (typeof v === 'string') return quote(v);
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  if (depth > 3) return '…';
  if (Array.isArray(v)) return `[${v.map((x) => render(x, depth + 1)).join(', ')}]`;
  if (typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>);
    if (entries.length === 0) return '{}';
    return `{ ${entries.map(([k, x]) => `${formatPath([k]) || "''"}: ${render(x, depth + 1)}`).join(', ')} }`;
  }
  return String(v);
}

/** Edit distance counting a swap of neighbours as one edit (optimal string alignment), for "did you mean" hints. */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/** The allowed name closest to `name`, if it is close enough to be a likely typo. */
export function closestMatch(name: string, allowed: readonly string[]): string | undefined {
  const n = name.toLowerCase();
  let best: string | undefined;
  let bestD = Infinity;
  for (const a of allowed) {
    const d = editDistance(n, a.toLowerCase());
    if (d < bestD) {
      bestD = d;
      best = a;
    }
  }
  if (best === undefined) return undefined;
  const limit = Math.max(1, Math.floor(Math.max(n.length, best.length) / 3));
  if (bestD <= limit) return best;
  // a prefix or extension of an allowed name: `kernel` for `kernelSize`, `filter_size` unlikely
  const prefix = allowed.find((a) => n.length >= 3 && (a.toLowerCase().startsWith(n) || n.startsWith(a.toLowerCase())));
  return prefix;
}

/** ` (did you mean 'filters'?)` or nothing. */
export function didYouMean(name: string, allowed: readonly string[]): string {
  const m = closestMatch(name, allowed);
  return m !== undefined && m !== name ? ` (did you mean ${quote(m)}?)` : '';
}

/** `unknown option 'filter' (did you mean 'filters'?); allowed: filters, kernelSize, …` */
export function unknownKeyMessage(key: string, allowed: readonly string[], noun: string, owner?: string): string {
  if (allowed.length === 0) return `unknown ${noun} ${quote(key)}; ${owner ?? 'this'} takes no ${noun}s`;
  return `unknown ${noun} ${quote(key)}${didYouMean(key, allowed)}; allowed: ${allowed.join(', ')}`;
}

/** The value at `path` inside `root`, or undefined when the path does not exist. */
export function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let v: unknown = root;
  for (const seg of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<PropertyKey, unknown>)[seg];
  }
  return v;
}

/** Options for `formatIssues`. */
export interface FormatOptions {
  /** name the thing at a path differently (e.g. `train.epochs` → `--epochs` for command-line overrides) */
  label?: (path: readonly PropertyKey[]) => string | undefined;
}

/** Zod's message for issues whose schema did not set one; ours are all set, this is the fallback. */
function fallbackMessage(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      return `expected ${issue.expected}`;
    case 'too_small':
      return `expected at least ${String(issue.minimum)}`;
    case 'too_big':
      return `expected at most ${String(issue.maximum)}`;
    case 'invalid_value':
      return `expected one of ${issue.values.map((x) => formatValue(x)).join(', ')}`;
    default:
      return issue.message;
  }
}

/** One line per problem, in the order zod found them. */
export function formatIssues(
  issues: readonly z.core.$ZodIssue[],
  root: unknown,
  source: string,
  opts: FormatOptions = {},
): string[] {
  const lines: string[] = [];
  for (const issue of issues) {
    const path = issue.path;
    const where = opts.label?.(path) ?? formatPath(path);
    const prefix = where ? `${source}: ${where}: ` : `${source}: `;
    if (issue.code === 'unrecognized_keys') {
      // our strict objects put one message per unknown key, newline-separated
      for (const msg of issue.message.split('\n')) lines.push(prefix + msg);
      continue;
    }
    const custom =
      issue.message &&
      !issue.message.startsWith('Invalid input') &&
      !/^(Too (small|big)|Unrecognized|Invalid option)/.test(issue.message);
    const msg = custom ? issue.message : fallbackMessage(issue);
    const params = (issue.code === 'custom' ? issue.params : undefined) as IssueParams | undefined;
    if (params?.noGot) {
      lines.push(prefix + msg);
      continue;
    }
    const value = valueAt(root, path);
    if (value === undefined) lines.push(`${prefix}missing; ${msg}`);
    else lines.push(`${prefix}${msg}, got ${formatValue(value)}${params?.hint ?? ''}`);
  }
  return [...new Set(lines)];
}
