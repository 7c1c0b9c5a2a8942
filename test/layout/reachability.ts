/**
 * Which files of src/ the project itself uses: everything reachable from its entry points through
 * static imports, dynamic import() and worker/child entries named by URL (see sourceGraph.ts).
 *
 * Entry points: src/index.ts (the library), src/cli/main.ts (the command; `paratrain launch` re-runs
 * it in every child), and every file of bench/ and scripts/ (`npm run bench`, the subset and screenshot
 * scripts are the project's own users). Worker entries (runtime/job/deviceWorker.ts, cli/compareRunner.ts)
 * need no listing: src names them next to import.meta.url, so they are found as references.
 * Tests are not entry points: a file of src/ that only tests reach is dead code with tests.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { moduleReferences, repoPath, sourceFiles } from './sourceGraph.ts';

export const LIBRARY_ENTRIES = ['src/index.ts', 'src/cli/main.ts'];
export const TOOL_FOLDERS = ['bench', 'scripts'];

export interface Reachability {
  /** repo-relative files of src/ that no entry point reaches */
  unreached: string[];
  /** repo-relative files of src/ reached from bench/ or scripts/ but not from the library entries */
  onlyByTools: string[];
  /** for an unreached file: the test files that reference it (what keeps it alive today) */
  testUsers: Map<string, string[]>;
}

/** Every file reachable from `entries` (absolute paths) by module references. */
export function reachableFrom(entries: readonly string[]): Set<string> {
  const seen = new Set<string>();
  const stack = entries.filter((e) => existsSync(e));
  while (stack.length > 0) {
    const file = stack.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const ref of moduleReferences(file)) if (ref.target && !seen.has(ref.target)) stack.push(ref.target);
  }
  return seen;
}

/** The reachability of src/ in the repository at `root`. */
export function checkReachability(root: string): Reachability {
  const src = sourceFiles(join(root, 'src'));
  const library = reachableFrom(LIBRARY_ENTRIES.map((e) => join(root, e)));
  const all = reachableFrom([...library, ...TOOL_FOLDERS.flatMap((f) => sourceFiles(join(root, f)))]);
  const unreached = src.filter((f) => !all.has(f));
  const testUsers = new Map<string, string[]>();
  for (const testFile of sourceFiles(join(root, 'test'))) {
    for (const ref of moduleReferences(testFile)) {
      if (!ref.target || !unreached.includes(ref.target)) continue;
      const users = testUsers.get(repoPath(root, ref.target)) ?? [];
      const user = repoPath(root, testFile);
      if (!users.includes(user)) users.push(user);
      testUsers.set(repoPath(root, ref.target), users);
    }
  }
  return {
    unreached: unreached.map((f) => repoPath(root, f)),
    onlyByTools: src.filter((f) => all.has(f) && !library.has(f)).map((f) => repoPath(root, f)),
    testUsers,
  };
}
