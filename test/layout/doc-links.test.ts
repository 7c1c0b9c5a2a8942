/**
 * The README and docs/ link to each other by relative paths and heading anchors; every link must
 * land on a file that exists and, with `#anchor`, on one of its headings (GitHub's slugs).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = resolve(fileURLToPath(new URL('../..', import.meta.url)));
/** Pages other branches of this session write (the data and api helpers); a link to one may land before the page does. */
const PENDING = new Set(['docs/data.md', 'docs/library.md']);
const PAGES = [
  'README.md',
  ...readdirSync(join(REPO, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2… */
function slugs(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = !fenced && /^#{1,6} (.*)$/.exec(line);
    if (!m) continue;
    const base = m[1]!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\- _]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

test('every relative link of the README and docs/ lands on a file and a heading that exist', (t) => {
  const broken: string[] = [];
  for (const page of PAGES) {
    const text = readFileSync(join(REPO, page), 'utf8').replace(/```[\s\S]*?```/g, '');
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const link = m[1]!;
      if (/^[a-z]+:/i.test(link)) continue;
      const [path, anchor] = link.split('#') as [string, string | undefined];
      const target = path === '' ? join(REPO, page) : resolve(dirname(join(REPO, page)), path);
      if (!existsSync(target)) {
        if (PENDING.has(relative(REPO, target))) t.diagnostic(`${page}: ${link} waits for ${relative(REPO, target)}`);
        else broken.push(`${page}: ${link} (no ${relative(REPO, target)})`);
        continue;
      }
      if (anchor !== undefined && target.endsWith('.md') && !slugs(readFileSync(target, 'utf8')).has(anchor)) {
        broken.push(`${page}: ${link} (no heading #${anchor} in ${relative(REPO, target)})`);
      }
    }
  }
  assert.deepEqual(broken, []);
});
