/**
 * The layer rule of docs/architecture.md, checked on a source tree: imports only point down the layer
 * table. The ranks are read from the table itself (the one place they live), so the check and the
 * doc cannot drift apart.
 *
 * The table is the first Markdown table whose header's first cell is `rank`. Each row: the rank (a
 * number, 3.5 allowed) in the first cell, and in the second cell one or more backticked paths under
 * src/: a folder ends in `/` (`src/comm/tcp/`), anything else is one file (`src/index.ts`). A file
 * belongs to the most specific entry that contains it.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { moduleReferences, repoPath, sourceFiles, sourceFolders } from './sourceGraph.ts';

export const ARCHITECTURE_DOC = 'docs/architecture.md';

export interface LayerEntry {
  /** repo-relative path without a trailing slash: 'src/comm/tcp', 'src/index.ts' */
  path: string;
  folder: boolean;
  rank: number;
  /** 1-based line of the row in the doc */
  line: number;
}

const cells = (row: string) =>
  row
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split('|')
    .map((c) => c.trim());

/** The layer table's entries; throws, naming the line, when the table is missing or a row is malformed. */
export function parseLayerTable(markdown: string, docName = ARCHITECTURE_DOC): LayerEntry[] {
  const lines = markdown.split('\n');
  const header = lines.findIndex((l) => l.trim().startsWith('|') && cells(l)[0]?.toLowerCase() === 'rank');
  if (header < 0) throw new Error(`${docName}: no layer table (a Markdown table whose first column is 'rank')`);
  const entries: LayerEntry[] = [];
  for (let i = header + 2; i < lines.length && lines[i]!.trim().startsWith('|'); i++) {
    const [rankCell = '', folderCell = ''] = cells(lines[i]!);
    const rank = Number(rankCell);
    if (rankCell === '' || !Number.isFinite(rank))
      throw new Error(`${docName}:${i + 1}: layer rank '${rankCell}' is not a number`);
    const paths = [...folderCell.matchAll(/`(src\/[^`]*)`/g)].map((m) => m[1]!);
    if (paths.length === 0)
      throw new Error(`${docName}:${i + 1}: the row names no \`src/…\` folder or file in its second column`);
    for (const p of paths) entries.push({ path: p.replace(/\/$/, ''), folder: p.endsWith('/'), rank, line: i + 1 });
  }
  if (entries.length === 0) throw new Error(`${docName}:${header + 1}: the layer table has no rows`);
  return entries;
}

/** The most specific entry containing the repo-relative `path`, or null. */
export function layerOf(entries: readonly LayerEntry[], path: string): LayerEntry | null {
  let best: LayerEntry | null = null;
  for (const e of entries) {
    const contains = e.folder ? path.startsWith(`${e.path}/`) : path === e.path;
    if (contains && (!best || e.path.length > best.path.length)) best = e;
  }
  return best;
}

const describe = (e: LayerEntry) => `${e.folder ? `${e.path}/` : e.path}, rank ${e.rank}`;

export interface LayerReport {
  /** imports that point up the table: file:line, the import, both layers */
  upward: string[];
  /** folders of src/ that hold source files but have no row of their own (a folder of sub-folders alone needs none) */
  unlistedFolders: string[];
  /** files of src/ that no entry contains */
  unlayeredFiles: string[];
  /** entries naming a folder or file that does not exist */
  missingEntries: string[];
}

/** Checks the tree at `root` (which holds src/ and docs/architecture.md) against its layer table. */
export function checkLayers(root: string): LayerReport {
  const entries = parseLayerTable(readFileSync(join(root, ARCHITECTURE_DOC), 'utf8'));
  const src = join(root, 'src');
  const report: LayerReport = { upward: [], unlistedFolders: [], unlayeredFiles: [], missingEntries: [] };
  const listed = new Set(entries.filter((e) => e.folder).map((e) => e.path));
  for (const dir of sourceFolders(src)) {
    const path = repoPath(root, dir);
    const holdsFiles = sourceFiles(dir).some((f) => dirname(f) === dir);
    if (holdsFiles && !listed.has(path))
      report.unlistedFolders.push(`${path}/ has no row in the layer table of ${ARCHITECTURE_DOC}`);
  }
  for (const e of entries) {
    const p = join(root, e.path);
    const ok = existsSync(p) && (e.folder ? statSync(p).isDirectory() : statSync(p).isFile());
    if (!ok) report.missingEntries.push(`${ARCHITECTURE_DOC}:${e.line} names ${describe(e)}, which does not exist`);
  }
  for (const file of sourceFiles(src)) {
    const path = repoPath(root, file);
    const from = layerOf(entries, path);
    if (!from) {
      report.unlayeredFiles.push(`${path} is in no layer of ${ARCHITECTURE_DOC}`);
      continue;
    }
    for (const ref of moduleReferences(file)) {
      if (!ref.target) continue;
      const to = layerOf(entries, repoPath(root, ref.target));
      if (to && to.rank > from.rank) {
        const how =
          ref.kind === 'import' ? 'imports' : ref.kind === 'dynamic' ? 'imports dynamically' : 'starts by URL';
        report.upward.push(
          `${path}:${ref.line} ${how} '${ref.specifier}': layer ${describe(from)} → layer ${describe(to)} points up the table`,
        );
      }
    }
  }
  return report;
}
