/**
 * Base ports for test jobs that no concurrent test can be using. `npm test` runs two test files at
 * once (and other checkouts on the machine may run theirs): picking ports at random let two jobs
 * meet on one now and then. Each test process claims a block of ports with a file in a shared
 * directory and hands out bases from it; a block is another's while a live process claims it.
 * All below Linux's ephemeral range (32768 and up), where the suite's other connections take their
 * local ports.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const FIRST = 20000,
  END = 32000;
/** ports per block (one process's), and per job: base … base + devices + 1, and + 64 per launch restart */
const BLOCK = 512,
  SPAN = 128;
const CLAIMS = join(tmpdir(), 'paratrain-test-ports');

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/**
 * Claims a free block: writes `<block>.<pid>`, then yields if any other live process claims the
 * same block (two claiming at once both yield and try other blocks). Returns its first port, or
 * -1 when every block is taken.
 */
const claimed = new Set<number>();

function claimBlock(): number {
  mkdirSync(CLAIMS, { recursive: true });
  const blocks = Math.floor((END - FIRST) / BLOCK);
  const from = Math.floor(Math.random() * blocks);
  for (let k = 0; k < blocks; k++) {
    const base = FIRST + ((from + k) % blocks) * BLOCK;
    if (claimed.has(base)) continue;
    const mine = join(CLAIMS, `${base}.${process.pid}`);
    writeFileSync(mine, '');
    const others = readdirSync(CLAIMS).filter((f) => f.startsWith(`${base}.`) && f !== `${base}.${process.pid}`);
    const live = others.filter((f) => alive(Number(f.slice(f.indexOf('.') + 1))));
    for (const dead of others.filter((f) => !live.includes(f))) rmSync(join(CLAIMS, dead), { force: true });
    if (live.length === 0) {
      claimed.add(base);
      process.once('exit', () => rmSync(mine, { force: true }));
      return base;
    }
    rmSync(mine, { force: true });
  }
  return -1;
}

let block = -1,
  used = BLOCK;

/** A base port for one job (its ports: base … base + 127), unused by any other test that claims ports this way. */
export function randomPort(): number {
  if (used + SPAN > BLOCK) {
    block = claimBlock();
    used = 0;
  }
  // every block claimed (many checkouts testing at once): a random port, as before
  if (block < 0) return FIRST + Math.floor(Math.random() * (END - FIRST - SPAN));
  const port = block + used;
  used += SPAN;
  return port;
}
