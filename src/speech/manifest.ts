/**
 * DeepSpeech/Coqui-style CSV manifests: a header naming the columns `wav_filename,wav_filesize,transcript`
 * (any order; other columns are ignored; wav_filesize may be absent or empty), one utterance per row.
 * A relative wav_filename resolves against the CSV's folder. Fields follow RFC 4180 (double quotes,
 * "" for a quote, a quoted field may hold commas and newlines). Checking a manifest reads no audio:
 * it resolves and stats every file and encodes every transcript, so bad lines are found before any
 * feature is computed or anything is written.
 */
import { readFileSync, statSync, type Stats } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { alphabetIndex, encodeTranscript, type Alphabet } from './alphabet.ts';
import { parseCsv } from '../data/csv.ts';

/** One row of a manifest, resolved and checked. */
export interface ManifestEntry {
  /** `train.csv:12`, the manifest and the line the row starts on */
  where: string;
  /** wav_filename as written */
  wavName: string;
  /** absolute path of the WAV file */
  path: string;
  /** file size (bytes) and modification time (ms), the feature cache's key */
  size: number;
  mtimeMs: number;
  transcript: string;
  /** model output indices of the lower-cased transcript (alphabet.ts) */
  labels: Int32Array;
}

const REQUIRED = ['wav_filename', 'transcript'] as const;

/**
 * Reads, resolves and checks a manifest: every row's WAV exists (a missing one, a directory, or a
 * wav_filesize that differs from the file's size is an error naming file:line), every transcript
 * is non-empty and spelled in the alphabet. Returns the rows in file order.
 */
export function readManifest(csvPath: string, alphabet: Alphabet): ManifestEntry[] {
  let text: string;
  try {
    text = readFileSync(csvPath, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new Error(
      `${csvPath}: cannot read the manifest${code === 'ENOENT' ? ': no such file' : ` (${(e as Error).message})`}`,
    );
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  const records = parseCsv(text, csvPath);
  if (records.length === 0)
    throw new Error(
      `${csvPath}: the manifest is empty; it needs the header wav_filename,wav_filesize,transcript and one row per utterance`,
    );
  const header = records[0]!;
  const columns = header.fields.map((f) => f.trim());
  for (const want of REQUIRED) {
    if (!columns.includes(want)) {
      throw new Error(
        `${csvPath}:${header.line}: the header has no ${want} column (found: ${columns.join(',')}); a manifest starts with wav_filename,wav_filesize,transcript`,
      );
    }
  }
  const col = {
    file: columns.indexOf('wav_filename'),
    size: columns.indexOf('wav_filesize'),
    text: columns.indexOf('transcript'),
  };
  const base = dirname(csvPath);
  const index = alphabetIndex(alphabet);
  const entries: ManifestEntry[] = [];
  for (const { line, fields } of records.slice(1)) {
    const where = `${csvPath}:${line}`;
    if (fields.length !== columns.length)
      throw new Error(
        `${where}: ${fields.length} fields, the header has ${columns.length}; quote a field that holds a comma`,
      );
    const wavName = fields[col.file]!.trim();
    if (wavName === '') throw new Error(`${where}: wav_filename is empty`);
    const labels = encodeTranscript(fields[col.text]!, index, alphabet, where);
    const path = isAbsolute(wavName) ? wavName : resolve(base, wavName);
    let st: Stats;
    try {
      st = statSync(path);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      throw new Error(
        `${where}: ${wavName}: ${code === 'ENOENT' ? `no such file (looked for ${path}; a relative wav_filename is relative to the manifest's folder)` : (e as Error).message}`,
      );
    }
    if (!st.isFile()) throw new Error(`${where}: ${wavName}: not a file`);
    const declared = col.size >= 0 ? fields[col.size]!.trim() : '';
    if (declared !== '' && Number(declared) !== st.size) {
      throw new Error(
        `${where}: wav_filesize is ${declared} but ${wavName} has ${st.size} bytes; the manifest is stale or names the wrong file (correct the size or leave the field empty)`,
      );
    }
    entries.push({ where, wavName, path, size: st.size, mtimeMs: st.mtimeMs, transcript: fields[col.text]!, labels });
  }
  if (entries.length === 0) throw new Error(`${csvPath}: the manifest lists no utterances (only a header)`);
  return entries;
}
