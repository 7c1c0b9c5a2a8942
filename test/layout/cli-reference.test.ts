/**
 * docs/cli.md documents every command, argument and option of `paratrain`, as each command's
 * `--help` shows them (run from src/cli/main.ts), with the defaults and choices the help states, and
 * nothing the command line does not have.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { argumentsOf, checkCliPage, parseHelp, readCli, type Cli } from './cliHelp.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const PAGE = 'docs/cli.md';
const list = (lines: readonly string[]) => `\n  ${lines.join('\n  ')}\n`;
/** `paratrain <args> --help`, from the source (the built CLI in dist/ may be older). */
const help = (args: string[]) =>
  execFileSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args, '--help'], {
    cwd: REPO,
    encoding: 'utf8',
  });
let cached: Cli | undefined;
const cli = () => (cached ??= readCli(help));
const pageText = () => readFileSync(`${REPO}${PAGE}`, 'utf8');

test('the command line is read whole: its commands, and options with defaults and choices', () => {
  const names = cli().commands.map((c) => c.name);
  for (const name of ['train', 'launch', 'eval', 'predict', 'transcribe', 'report', 'compare', 'simulate', 'info'])
    assert.ok(names.includes(name), `paratrain ${name} not found in the help`);
  const train = cli().commands.find((c) => c.name === 'train')!;
  assert.ok(train.options.length >= 10, 'too few options read from `paratrain train --help`');
  const backend = train.options.find((o) => o.flags === '--backend <name>');
  assert.deepEqual(backend?.choices, ['auto', 'js', 'wasm', 'native', 'onednn', 'webgpu']);
  const launch = cli().commands.find((c) => c.name === 'launch')!;
  assert.equal(launch.options.find((o) => o.flags === '--master-port <port>')?.default, '29500');
});

test(`${PAGE} documents every command, argument and option of paratrain, and only those`, () => {
  const problems = checkCliPage(cli(), pageText(), PAGE);
  assert.deepEqual(problems, [], `bring ${PAGE} in line with src/cli/main.ts:${list(problems)}`);
});

// The check checks itself: what it is there to find, it finds.

test('on the real page: a missing option, an option that does not exist, a missing command, a missing default', () => {
  const page = pageText();
  const check = (text: string) => checkCliPage(cli(), text, PAGE);
  const drop = page.replace(/^\| `--init-from <checkpoint>` \|.*\n/m, '');
  assert.notEqual(drop, page);
  assert.ok(check(drop).some((p) => p.includes('## paratrain train: `--init-from <checkpoint>` has no row')));

  const extra = page.replace(/^(\| `--beam <n>` \|.*\n)/m, '$1| `--language <code>` | — | gone |\n');
  assert.ok(check(extra).some((p) => p.includes('`--language <code>` is not an option of the command line')));

  const noSection = page.replace(/^## paratrain info\n/m, '## Info\n');
  assert.ok(check(noSection).some((p) => p.includes("`paratrain info` has no '## paratrain info' section")));

  const noDefault = page.replace(/^(\| `--steps <n>` \| )200 \|/m, '$1many |');
  assert.notEqual(noDefault, page);
  assert.ok(check(noDefault).some((p) => p.includes("`--steps <n>`'s row does not show '200'")));
});

test('on a small help text: wrapped descriptions, defaults, choices and arguments are read', () => {
  const text = [
    'Usage: tool run [options] <config> [more...]',
    '',
    'Options:',
    '  --mode <m>     how (choices: "fast", "slow",',
    '                 default: "fast")',
    '  --steps <n>    steps simulated, with a long',
    '                 description (default: 200)',
    '  --title <t>    title (default: the first run)',
    '  -h, --help     display help for command',
    '',
    'Commands:',
    '  run [options] <config> [more...]  run it',
  ].join('\n');
  const h = parseHelp(text);
  assert.deepEqual(h.commands, [{ name: 'run', usage: 'run [options] <config> [more...]' }]);
  assert.deepEqual(argumentsOf(h.commands[0]!.usage), ['config', 'more']);
  assert.deepEqual(
    h.options.map((o) => [o.flags, o.default, o.choices]),
    [
      ['--mode <m>', 'fast', ['fast', 'slow']],
      ['--steps <n>', '200', undefined],
      ['--title <t>', undefined, undefined],
      ['-h, --help', undefined, undefined],
    ],
  );
});
