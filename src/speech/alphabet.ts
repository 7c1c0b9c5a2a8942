/**
 * The alphabet of a speech recogniser's outputs. Output 0 of the model is the CTC blank; symbol k of
 * the alphabet is output k + 1, so a model over an alphabet of K symbols has K + 1 outputs, and label
 * sequences (what the loss is given) hold output indices 1 … K, never 0.
 *
 * The default alphabet is DeepSpeech's English one: space, a–z, apostrophe (28 symbols, 29 outputs).
 * A file gives another, in DeepSpeech's alphabet.txt format: one symbol (one Unicode code point) per
 * line, in output order; a line starting with `#` is a comment, `\#` stands for the symbol `#`; a line
 * holding one space is the space symbol.
 */
import { readFileSync } from 'node:fs';

export interface Alphabet {
  /** symbol k is model output k + 1 */
  symbols: string[];
  /** where it came from: 'default (space, a–z, apostrophe)' or the file */
  source: string;
}

export const DEFAULT_ALPHABET: Readonly<Alphabet> = Object.freeze({
  symbols: [' ', ...'abcdefghijklmnopqrstuvwxyz', "'"],
  source: 'default (space, a–z, apostrophe)',
});

/** Index of the CTC blank among the model's outputs. */
export const BLANK = 0;

/** The model's output count for an alphabet: its symbols plus the blank. */
export function outputCount(alphabet: Alphabet): number {
  return alphabet.symbols.length + 1;
}

/** Shows a symbol in a message: the space and control characters by name. */
export function showSymbol(s: string): string {
  if (s === ' ') return "' ' (space)";
  const cp = s.codePointAt(0)!;
  if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) return `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;
  return `'${s}' (U+${cp.toString(16).toUpperCase().padStart(4, '0')})`;
}

/** Parses DeepSpeech's alphabet.txt format; `name` (the file) starts every error. */
export function parseAlphabet(text: string, name: string): Alphabet {
  const symbols: string[] = [];
  const seen = new Map<string, number>();
  const lines = text.split('\n');
  // the final newline ends the last line, it does not start an empty one
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  lines.forEach((raw, i) => {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (line.startsWith('#')) return;
    const symbol = line.startsWith('\\#') ? line.slice(1) : line;
    const points = [...symbol];
    if (points.length !== 1) {
      throw new Error(
        `${name}:${i + 1}: ${points.length === 0 ? 'an empty line' : `"${line}" has ${points.length} characters`}; each line holds one symbol (a line with one space is the space symbol, # starts a comment, \\# is the symbol #)`,
      );
    }
    const before = seen.get(symbol);
    if (before !== undefined)
      throw new Error(`${name}:${i + 1}: ${showSymbol(symbol)} is already the symbol of line ${before}`);
    seen.set(symbol, i + 1);
    symbols.push(symbol);
  });
  if (symbols.length === 0) throw new Error(`${name}: the alphabet has no symbols`);
  return { symbols, source: name };
}

/** Reads an alphabet file (see parseAlphabet). */
export function readAlphabet(path: string): Alphabet {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new Error(
      `${path}: cannot read the alphabet file${code === 'ENOENT' ? ': no such file' : ` (${(e as Error).message})`}`,
    );
  }
  return parseAlphabet(text, path);
}

/** symbol → model output index (k + 1) */
export function alphabetIndex(alphabet: Alphabet): Map<string, number> {
  return new Map(alphabet.symbols.map((s, k) => [s, k + 1]));
}

/**
 * A transcript's label sequence (model output indices), lower-cased first. An empty transcript or a
 * character outside the alphabet is an error starting with `where` (the manifest's file:line).
 */
export function encodeTranscript(
  transcript: string,
  index: Map<string, number>,
  alphabet: Alphabet,
  where: string,
): Int32Array {
  if (transcript.trim() === '')
    throw new Error(`${where}: the transcript is empty; every utterance needs the text spoken in it`);
  const text = transcript.toLowerCase();
  const points = [...text];
  const labels = new Int32Array(points.length);
  for (let i = 0; i < points.length; i++) {
    const label = index.get(points[i]!);
    if (label === undefined) {
      throw new Error(
        `${where}: the transcript "${transcript}" has ${showSymbol(points[i]!)}, which is not in the alphabet (${alphabet.source}); remove it from the transcript or add it to an alphabet file`,
      );
    }
    labels[i] = label;
  }
  return labels;
}
