/**
 * The `paratrain` command line as its `--help` shows it (commands, arguments, options with their
 * defaults and choices), and the check of docs/cli.md against it (cli-reference.test.ts).
 *
 * The page has a `## Global options` section and one `## paratrain <command>` section per command.
 * A section shows the command's usage as `` `paratrain <command> [options] <args…>` `` (as the
 * top-level help lists it), a table headed `| argument |` with a row per argument and a table headed
 * `| option |` with a row per option, the option as the help writes it (`` `--resume <runDir>` ``).
 */
import { tableRows } from './referenceTables.ts';

export interface CliOption {
  /** as the help writes it: `--resume <runDir>`, `-h, --help` */
  flags: string;
  description: string;
  /** the default commander shows, when it is a number or a quoted string */
  default?: string;
  choices?: string[];
}

export interface HelpText {
  /** `train [options] [config]` for each command the top-level help lists */
  commands: { name: string; usage: string }[];
  options: CliOption[];
}

export interface CliCommand {
  name: string;
  /** `train [options] [config]` */
  usage: string;
  arguments: string[];
  /** without `-h, --help`, which every command has */
  options: CliOption[];
}

export interface Cli {
  globalOptions: CliOption[];
  commands: CliCommand[];
}

export const HELP_FLAGS = '-h, --help';

/** The entries of one block of a help text (`Options:`), each a term and its description (wrapped lines joined). */
function entries(lines: readonly string[]): { term: string; description: string }[] {
  const out: { term: string; description: string }[] = [];
  for (const line of lines) {
    const entry = /^ {2}(\S(?:.*?\S)?)(?: {2,}(.*))?$/.exec(line);
    if (entry) out.push({ term: entry[1]!, description: entry[2] ?? '' });
    else if (/^ {3,}\S/.test(line) && out.length) {
      const last = out[out.length - 1]!;
      last.description = `${last.description} ${line.trim()}`.trim();
    }
  }
  return out;
}

/** Commander's `(choices: "a", "b", default: "a")` or `(default: 1)` at the end of a description. */
function optionOf(flags: string, description: string): CliOption {
  const option: CliOption = { flags, description };
  const tail = /\(((?:choices: .*?)?(?:,? ?default: .*)?)\)$/.exec(description)?.[1] ?? '';
  const choices = /choices: ((?:"[^"]*"(?:, )?)+)/.exec(tail);
  if (choices) option.choices = [...choices[1]!.matchAll(/"([^"]*)"/g)].map((m) => m[1]!);
  const value = /default: (.*)$/.exec(tail)?.[1];
  // a quoted string or a number is commander's; other text is the description's own words
  if (value !== undefined && /^"[^"]*"$/.test(value)) option.default = value.slice(1, -1);
  else if (value !== undefined && /^-?\d+(\.\d+)?$/.test(value)) option.default = value;
  return option;
}

/** The commands and options of one `--help` text. */
export function parseHelp(text: string): HelpText {
  const blocks = new Map<string, string[]>();
  let block: string[] | undefined;
  for (const line of text.split('\n')) {
    const heading = /^(\w[\w ]*):$/.exec(line);
    if (heading) blocks.set(heading[1]!, (block = []));
    else if (line.trim() === '') block = undefined;
    else block?.push(line);
  }
  return {
    commands: entries(blocks.get('Commands') ?? []).map((e) => ({ name: e.term.split(' ')[0]!, usage: e.term })),
    options: entries(blocks.get('Options') ?? []).map((e) => optionOf(e.term, e.description)),
  };
}

/** `transcribe [options] <config> <wavs...>` → config, wavs */
export const argumentsOf = (usage: string): string[] =>
  [...usage.matchAll(/[<[]([^\]>.]+)(?:\.\.\.)?[\]>]/g)].map((m) => m[1]!).filter((a) => a !== 'options');

/** The whole command line, from `help(args)` returning `paratrain <args> --help`'s output. */
export function readCli(help: (args: string[]) => string): Cli {
  const top = parseHelp(help([]));
  const commands = top.commands.map(({ name, usage }) => {
    // `help [command]` is commander's own, and `help --help` shows the top-level help: no options of its own
    const options = name === 'help' ? [] : parseHelp(help([name])).options.filter((o) => o.flags !== HELP_FLAGS);
    return { name, usage, arguments: argumentsOf(usage), options };
  });
  return { globalOptions: top.options, commands };
}

const GLOBAL = 'Global options';
const sectionOf = (command: string) => `paratrain ${command}`;

/** What docs/cli.md gets wrong against the command line, one line each with the fix. */
export function checkCliPage(cli: Cli, markdown: string, page: string): string[] {
  const problems: string[] = [];
  const rows = tableRows(markdown, ['option', 'argument']);
  const sections = new Set(
    markdown
      .split('\n')
      .filter((l) => l.startsWith('## '))
      .map((l) => l.slice(3).trim()),
  );
  const sectionText = (name: string) => {
    const start = markdown.indexOf(`\n## ${name}\n`);
    if (start < 0) return '';
    const end = markdown.indexOf('\n## ', start + 1);
    return markdown.slice(start, end < 0 ? undefined : end);
  };

  const compare = (section: string, table: 'option' | 'argument', expected: Map<string, CliOption | undefined>) => {
    const documented = rows.filter((r) => r.section === section && r.table === table);
    const named = new Set(documented.flatMap((r) => r.keys));
    for (const [key, option] of expected) {
      const row = documented.find((r) => r.keys.includes(key));
      if (!row) {
        problems.push(`${page}: ## ${section}: \`${key}\` has no row; add one to its '| ${table} |' table`);
        continue;
      }
      const wanted = [...(option?.choices ?? []), ...(option?.default !== undefined ? [option.default] : [])];
      const missing = wanted.filter((w) => !row.text.includes(w));
      if (missing.length)
        problems.push(`${page}:${row.line}: \`${key}\`'s row does not show ${missing.map((m) => `'${m}'`).join(', ')}`);
    }
    for (const key of named) {
      if (!expected.has(key))
        problems.push(`${page}: ## ${section}: \`${key}\` is not an ${table} of the command line; remove its row`);
    }
  };

  if (!sections.has(GLOBAL)) problems.push(`${page}: no '## ${GLOBAL}' section`);
  compare(GLOBAL, 'option', new Map(cli.globalOptions.map((o) => [o.flags, o])));
  for (const c of cli.commands) {
    const section = sectionOf(c.name);
    if (!sections.has(section)) {
      problems.push(`${page}: \`paratrain ${c.name}\` has no '## ${section}' section`);
      continue;
    }
    if (!sectionText(section).includes(`\`paratrain ${c.usage}\``))
      problems.push(`${page}: ## ${section}: show the usage as \`paratrain ${c.usage}\``);
    compare(section, 'option', new Map(c.options.map((o) => [o.flags, o])));
    compare(section, 'argument', new Map(c.arguments.map((a) => [a, undefined])));
  }
  const commands = new Set(cli.commands.map((c) => sectionOf(c.name)));
  for (const s of sections) {
    if (s.startsWith('paratrain ') && !commands.has(s))
      problems.push(`${page}: ## ${s}: paratrain has no such command; remove the section`);
  }
  return problems;
}
