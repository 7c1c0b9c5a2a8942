/**
 * YAML config → validated `RunConfig`: `loadConfig(path)` reads and parses a YAML file,
 * `parseConfig(object, sourceName)` validates an already-parsed object (YAML form).
 *
 * Every problem is reported, one per line, as `<file>: <path>: <what is wrong>, got <value>`,
 * in a thrown `ConfigError`.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { LineCounter, parseDocument } from 'yaml';
import type { RunConfig } from './runConfig.ts';
import { configSchema } from './schema/index.ts';
import { ConfigError, formatIssues, type FormatOptions } from './errors.ts';
import { checkYamlDepth } from './yamlDepth.ts';
import { dataPathsFrom } from './dataPaths.ts';

/**
 * Reads, parses and validates a YAML config file; relative data paths start at the file's folder
 * (dataPaths.ts). Throws `ConfigError`.
 */
export function loadConfig(path: string): RunConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new ConfigError([`config file not found: ${path}`]);
    if (code === 'EISDIR') throw new ConfigError([`config file ${path} is a directory; expected a YAML file`]);
    throw new ConfigError([`cannot read config file ${path}: ${(e as Error).message}`]);
  }
  const config = parseConfig(parseYaml(text, path), path);
  return { ...config, data: dataPathsFrom(config.data, dirname(resolve(path))) };
}

/** Parses YAML text into plain data; syntax errors become `file:line:col: ...` lines. */
export function parseYaml(text: string, sourceName: string): unknown {
  checkYamlDepth(text, sourceName);
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const lines = text.split(/\r?\n/);
    const issues: string[] = [];
    const details: string[] = [];
    for (const err of doc.errors) {
      const { line, col } = lineCounter.linePos(err.pos[0]);
      let msg = err.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
      // the parser recurses per level: a stack overflow means nesting no config needs
      if (/call stack/i.test(msg))
        msg = 'nested too deeply (the parser ran out of stack); a config needs a few levels of nesting';
      if (issues.some((i) => i.endsWith(msg))) continue;
      issues.push(`${sourceName}:${line}:${col}: YAML syntax error: ${msg}`);
      if (details.length === 0 && lines[line - 1] !== undefined) {
        // a long line is shown around the error only
        const from = Math.max(0, col - 61);
        details.push(
          `    ${lines[line - 1]!.slice(from, from + 120)}`,
          `    ${' '.repeat(Math.max(0, col - 1 - from))}^`,
        );
      }
    }
    throw new ConfigError(issues, details.join('\n'));
  }
  try {
    return doc.toJS({ maxAliasCount: 100 });
  } catch (e) {
    // the yaml library refuses alias bombs (a few lines that expand to millions of nodes) here
    throw new ConfigError([
      `${sourceName}: YAML aliases (*name) expand too much (${(e as Error).message.split('\n')[0]}); a config needs few or none`,
    ]);
  }
}

/**
 * Validates a config in YAML form (as parsed from YAML or written in code) and normalises it.
 * `sourceName` starts every error line (usually the file name).
 */
export function parseConfig(raw: unknown, sourceName = 'config'): RunConfig {
  return validate(raw, sourceName);
}

/** Validates and normalises a config in YAML form; `opts` may rename paths in messages (overrides name flags). */
export function validate(raw: unknown, sourceName: string, opts?: FormatOptions): RunConfig {
  const input = dropNullValues(raw);
  if (input === undefined) {
    throw new ConfigError([
      `${sourceName}: the config is empty; it needs at least a model section (model: { input: [28, 28, 1], layers: [...] })`,
    ]);
  }
  const r = configSchema.safeParse(input);
  if (r.success) return r.data;
  throw new ConfigError(formatIssues(r.error.issues, input, sourceName, opts));
}

/**
 * YAML writes an empty value (`flatten:`, `data:`) as null; treat a null map value as absent,
 * so `- flatten:` means `- flatten: {}` and an empty section means all defaults.
 */
function dropNullValues(v: unknown): unknown {
  if (v === null) return undefined;
  if (Array.isArray(v)) return v.map((x) => (x === null ? x : dropNullValues(x)));
  if (typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      if (x !== null) out[k] = dropNullValues(x);
      else out[k] = undefined;
    }
    return out;
  }
  return v;
}
