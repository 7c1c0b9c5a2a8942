/**
 * A small CSV reader (RFC 4180): fields separated by a delimiter, double-quoted fields that may hold
 * the delimiter, newlines and doubled quotes (""), LF or CRLF line ends, a UTF-8 byte-order mark,
 * blank lines skipped. Every record keeps the line it starts on, so errors name file:line.
 * (No installed package reads CSV; this is the part of one that datasets need.)
 */

/** One record: its fields and the 1-based line it starts on. */
export interface CsvRecord {
  line: number;
  fields: string[];
}

/** Splits CSV text into records. `file` names the source in errors. */
export function parseCsv(text: string, file: string, delimiter = ','): CsvRecord[] {
  if (delimiter.length !== 1 || delimiter === '"' || delimiter === '\n' || delimiter === '\r') {
    throw new Error(
      `${file}: the CSV delimiter must be one character other than a quote or a line end, got ${JSON.stringify(delimiter)}`,
    );
  }
  const records: CsvRecord[] = [];
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  let line = 1;
  const n = text.length;
  const d = delimiter.charCodeAt(0);
  while (i < n) {
    const start = line;
    const fields: string[] = [];
    let blank = true;
    // one record: fields until an unquoted line end
    for (;;) {
      let value = '';
      if (text.charCodeAt(i) === 0x22) {
        blank = false;
        const quoteLine = line;
        i++;
        for (;;) {
          if (i >= n)
            throw new Error(
              `${file}:${quoteLine}: a quoted field is never closed (a " without its closing "); close it or double the quotes inside it ("")`,
            );
          const c = text.charCodeAt(i);
          if (c === 0x22) {
            if (text.charCodeAt(i + 1) === 0x22) {
              value += '"';
              i += 2;
              continue;
            }
            i++;
            break;
          }
          if (c === 0x0a) line++;
          value += text[i];
          i++;
        }
        // only spaces may follow the closing quote before the delimiter or the line end
        while (i < n && text.charCodeAt(i) === 0x20) i++;
        const c = text.charCodeAt(i);
        if (i < n && c !== d && c !== 0x0a && c !== 0x0d) {
          throw new Error(
            `${file}:${line}: field ${fields.length + 1} has text after its closing quote; quote the whole field and double the quotes inside it ("")`,
          );
        }
      } else {
        const from = i;
        while (i < n) {
          const c = text.charCodeAt(i);
          if (c === d || c === 0x0a || c === 0x0d) break;
          i++;
        }
        value = text.slice(from, i);
        if (value.trim() !== '') blank = false;
      }
      fields.push(value);
      if (i < n && text.charCodeAt(i) === d) {
        i++;
        blank = false;
        continue;
      }
      // a line end (CRLF, LF or a lone CR) or the end of the text ends the record
      if (text.charCodeAt(i) === 0x0d) i++;
      if (text.charCodeAt(i) === 0x0a) i++;
      line++;
      break;
    }
    if (!blank) records.push({ line: start, fields });
  }
  return records;
}

const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** Whether a cell is a number as CSV datasets read them: plain decimal notation (spaces around allowed). */
export function isCsvNumber(cell: string): boolean {
  return DECIMAL.test(cell.trim());
}

/**
 * A column as every message names it: counted from 1, with its header name when it has one
 * (`column 3 'petal_length'`), in training, eval and predict alike.
 */
export function columnLabel(index: number, name?: string): string {
  return `column ${index + 1}${name === undefined ? '' : ` '${name}'`}`;
}

/**
 * A cell as a number, or an error naming file:line, the column and the fix. Plain decimal notation
 * only: `0x10`, `1,5` and `''` are refused rather than read as 16, NaN or 0.
 */
export function csvNumber(
  cell: string,
  file: string,
  line: number,
  column: number,
  columnName: string | undefined,
): number {
  const s = cell.trim();
  if (isCsvNumber(s)) return Number(s);
  const where = `${file}:${line}: ${columnLabel(column, columnName)}`;
  if (s === '') throw new Error(`${where} is empty (a missing value); fill it in or drop the row`);
  throw new Error(
    `${where}: ${JSON.stringify(cell.length > 40 ? `${cell.slice(0, 40)}…` : cell)} is not a number; feature and target columns must hold plain decimal numbers (e.g. 3.5, -2e-3)`,
  );
}
