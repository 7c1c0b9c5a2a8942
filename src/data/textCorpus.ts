/**
 * A text dataset's corpus: one UTF-8 file, or every `.txt` file of a folder in name order,
 * concatenated as they are; its characters as code points, where each character came from (for
 * messages: file, line, column), and its fingerprint (SHA-256 of the bytes read, in order: a single
 * file's is `sha256sum`'s).
 */
import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { isDirectory, readDataFile, resolveDataPath } from './files.ts';
import { codePointsOf } from './vocabulary.ts';
import type { TextDataSpec } from './spec.ts';

/** One file of the corpus: its characters are the corpus's from `start` on. */
interface CorpusFile {
  path: string;
  start: number;
  points: Uint32Array;
}

export interface Corpus {
  /** the file, or the folder, as the config resolved it */
  source: string;
  files: CorpusFile[];
  /** every character's code point, the files one after another */
  points: Uint32Array;
  /** `sha256:` and the hex SHA-256 of the files' bytes, in order */
  fingerprint: string;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** The .txt files of `folder`, in name order (code-unit order, the same on every machine). */
function textFilesOf(folder: string): string[] {
  if (!isDirectory(folder))
    throw new Error(`data.folder: ${folder} is not a folder; name a folder of .txt files, or one file as data.file`);
  const names = readdirSync(folder)
    .filter((n) => n.toLowerCase().endsWith('.txt'))
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  if (names.length === 0)
    throw new Error(`data.folder: ${folder} holds no .txt files; put the text in files ending in .txt`);
  return names.map((n) => join(folder, n));
}

/** Reads the corpus `options` names (relative paths from `dir`). */
export function readCorpus(options: Pick<TextDataSpec, 'file' | 'folder'>, dir: string | undefined): Corpus {
  const source = resolveDataPath((options.file ?? options.folder)!, dir);
  const paths = options.file !== undefined ? [source] : textFilesOf(source);
  const field = options.file !== undefined ? 'data.file' : 'data.folder';
  const hash = createHash('sha256');
  const files: CorpusFile[] = [];
  let length = 0;
  for (const path of paths) {
    const bytes = readDataFile(path, field);
    hash.update(bytes);
    let text: string;
    try {
      // a byte-order mark is not text: the decoder drops it
      text = UTF8.decode(bytes);
    } catch {
      throw new Error(`${path}: not valid UTF-8 text; save it as UTF-8`);
    }
    const points = codePointsOf(text);
    files.push({ path, start: length, points });
    length += points.length;
  }
  const points = files.length === 1 ? files[0]!.points : new Uint32Array(length);
  if (files.length > 1) for (const f of files) points.set(f.points, f.start);
  if (length === 0) throw new Error(`${field}: ${source} holds no text`);
  return { source, files, points, fingerprint: `sha256:${hash.digest('hex')}` };
}

/** Where character `index` of the corpus is: `file:line:column` (both from 1). */
export function locateInCorpus(corpus: Corpus, index: number): string {
  let file = corpus.files[0]!;
  for (const f of corpus.files) if (f.start <= index) file = f;
  const at = index - file.start;
  let line = 1,
    column = 1;
  for (let i = 0; i < at; i++) {
    if (file.points[i] === 0x0a) {
      line++;
      column = 1;
    } else column++;
  }
  return `${file.path}:${line}:${column}`;
}
