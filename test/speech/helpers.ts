import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import wavefile from 'wavefile';

export function tmpDir(prefix = 'paratrain-speech-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** A 16-bit mono WAV of `seconds` of two tones keyed by `seed` (distinct files give distinct features). */
export function toneWav(seconds: number, seed: number, rate = 16000): Uint8Array {
  const n = Math.round(seconds * rate);
  const x = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const t = i / rate;
    x[i] = Math.round(
      8000 * Math.sin(2 * Math.PI * (300 + 97 * seed) * t) +
        3000 * Math.sin(2 * Math.PI * (1500 + 211 * seed) * t * (1 + t)),
    );
  }
  const wav = new wavefile.WaveFile();
  wav.fromScratch(1, rate, '16', x);
  return wav.toBuffer();
}

/** Writes files (path relative to dir → text or bytes), making folders. */
export function writeTree(dir: string, files: Record<string, string | Uint8Array>): void {
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
}

/** A manifest's text: header and rows [wav, transcript] (wav_filesize left empty). */
export function csv(rows: [string, string][]): string {
  return `wav_filename,wav_filesize,transcript\n${rows.map(([w, t]) => `${w},,${t}`).join('\n')}\n`;
}
