/**
 * A bound on how deeply a YAML text nests, checked before the yaml library sees it. The library
 * parses recursively: a few thousand levels overflow the stack, and near the stack's end V8 can
 * abort the whole process (a fatal "RegExpCompiler Allocation failed") instead of throwing. No
 * config nests more than a handful of levels, so a generous bound costs nothing.
 */
import { ConfigError } from './errors.ts';

/** Columns of indentation plus block indicators (`- `, `? `, `key: `) on one line. */
export const MAX_BLOCK_DEPTH = 200;
/** Open `[` / `{` at once. */
export const MAX_FLOW_DEPTH = 64;

/** Throws a ConfigError naming the line if `text` nests beyond the bounds above. */
export function checkYamlDepth(text: string, sourceName: string): void {
  const tooDeep = (line: number, col: number, what: string) =>
    new ConfigError([
      `${sourceName}:${line}:${col}: YAML nested too deeply (${what}); a config needs a few levels of nesting`,
    ]);
  let flow = 0;
  let quote: '"' | "'" | undefined;
  const lines = text.split('\n');
  for (let l = 0; l < lines.length; l++) {
    const line = lines[l]!;
    let indent = 0;
    while (indent < line.length && line[indent] === ' ') indent++;
    if (line[indent] === '#') continue;
    let block = indent;
    for (let c = indent; c < line.length; c++) {
      const ch = line[c]!;
      if (quote) {
        if (ch === quote) quote = undefined;
        continue;
      }
      if (ch === '#' && (c === 0 || line[c - 1] === ' ')) break;
      if (ch === '"' || ch === "'") quote = ch;
      else if (ch === '[' || ch === '{') {
        if (++flow > MAX_FLOW_DEPTH) throw tooDeep(l + 1, c + 1, `more than ${MAX_FLOW_DEPTH} open brackets`);
      } else if (ch === ']' || ch === '}') flow = Math.max(0, flow - 1);
      else if ((ch === '-' || ch === '?' || ch === ':') && (line[c + 1] === ' ' || c + 1 === line.length)) block++;
    }
    if (block > MAX_BLOCK_DEPTH)
      throw tooDeep(
        l + 1,
        1,
        `${block} levels of indentation and block indicators on one line, at most ${MAX_BLOCK_DEPTH}`,
      );
  }
}
