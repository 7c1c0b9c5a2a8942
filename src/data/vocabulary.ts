/**
 * A character vocabulary: the distinct Unicode code points of a text, sorted by code point, so the
 * same text gives the same ids on every machine. Token id k is `symbols[k]`. The text dataset takes
 * it from its training split; the checkpoint records it (`paratrain.data`), so generate and resume
 * encode with the vocabulary the model was trained on.
 */

/** Where a character of the text is, for messages: `input.txt:12:5` (file, line, column). */
export type Locate = (index: number) => string;

/** The Unicode code points of `text` (a character outside the Basic Multilingual Plane is one). */
export function codePointsOf(text: string): Uint32Array {
  // UTF-16 units bound the code points from above
  const out = new Uint32Array(text.length);
  let n = 0;
  for (const ch of text) out[n++] = ch.codePointAt(0)!;
  return n === out.length ? out : out.slice(0, n);
}

/** How a character looks in a message: printable as itself (quoted), every one with its code point. */
export function describeChar(ch: string): string {
  const cp = ch.codePointAt(0)!;
  const hex = `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;
  return /^[\p{L}\p{N}\p{P}\p{S}]$/u.test(ch) ? `'${ch}' (${hex})` : `${JSON.stringify(ch)} (${hex})`;
}

export class Vocabulary {
  /** the characters in id order (ascending code point) */
  readonly symbols: readonly string[];
  private readonly ids: Map<number, number>;

  constructor(symbols: readonly string[]) {
    const points = symbols.map((s, k) => {
      const cp = s.codePointAt(0);
      if (cp === undefined || String.fromCodePoint(cp) !== s)
        throw new Error(`vocabulary: entry ${k} (${JSON.stringify(s)}) is not one character`);
      return cp;
    });
    for (let k = 1; k < points.length; k++) {
      if (points[k]! <= points[k - 1]!)
        throw new Error(
          `vocabulary: entries ${k - 1} and ${k} (${describeChar(symbols[k - 1]!)}, ${describeChar(symbols[k]!)}) are not in ascending code point order`,
        );
    }
    this.symbols = [...symbols];
    this.ids = new Map(points.map((cp, k) => [cp, k]));
  }

  /** The distinct characters of `points` (code points), sorted by code point. */
  static of(points: ArrayLike<number>): Vocabulary {
    const seen = new Set<number>();
    for (let i = 0; i < points.length; i++) seen.add(points[i]!);
    return new Vocabulary([...seen].sort((a, b) => a - b).map((cp) => String.fromCodePoint(cp)));
  }

  get size(): number {
    return this.symbols.length;
  }

  /**
   * Code points as token ids. A character outside the vocabulary is an error naming it and where it
   * is (`locate` of its index) and the message's `fix`.
   */
  encode(points: ArrayLike<number>, locate: Locate, fix: string): Int32Array {
    const out = new Int32Array(points.length);
    for (let i = 0; i < points.length; i++) {
      const id = this.ids.get(points[i]!);
      if (id === undefined)
        throw new Error(
          `${locate(i)}: character ${describeChar(String.fromCodePoint(points[i]!))} is not in the vocabulary of ${this.size} characters; ${fix}`,
        );
      out[i] = id;
    }
    return out;
  }

  /** The text of token ids. */
  decode(ids: ArrayLike<number>): string {
    let s = '';
    for (let i = 0; i < ids.length; i++) {
      const ch = this.symbols[ids[i]!];
      if (ch === undefined) throw new Error(`vocabulary: token id ${ids[i]} is outside 0..${this.size - 1}`);
      s += ch;
    }
    return s;
  }

  /** Whether `other` holds the same characters in the same order. */
  equals(other: readonly string[]): boolean {
    return other.length === this.symbols.length && other.every((s, k) => s === this.symbols[k]);
  }
}
