/** `paratrain --version` (and `-V`, commander's short form) prints `paratrain <package.json's version>` and exits 0. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO, runCli } from './helpers.ts';

const { version } = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string };

// --version through tsx from the sources, -V from the tests' bundle of them: both find package.json
for (const flag of ['--version', '-V']) {
  test(`paratrain ${flag}: the name and the package's version, exit 0`, async () => {
    const r = await runCli([flag], { tsx: flag === '--version' });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `paratrain ${version}\n`);
    assert.equal(r.stderr, '');
  });
}
