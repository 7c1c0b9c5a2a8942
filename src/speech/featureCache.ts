/**
 * The feature cache: one file per (manifest, feature options) holding the un-normalised features of
 * every utterance it lists, each keyed by its WAV's absolute path, size and modification time. A file
 * whose key changed is recomputed; a changed option (another hash) selects another cache file. The
 * cache lives in the user's cache directory by default, not next to the data, which may be read-only
 * (the shipped subset inside an npm install, a shared corpus). Reading a cache gives exactly the float32
 * values computing them gives (test/speech/featureCache.test.ts).
 *
 * File layout (little-endian): "PTFEAT1\n", u32 header bytes H, H bytes of JSON
 * `{ manifest, optionsHash, featureSize, entries: [[path, size, mtimeMs, frames], …] }` padded with
 * spaces to a multiple of 4, then Σframes × featureSize float32 values in entry order. A file that does
 * not match this layout is ignored (and replaced), never trusted.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

const MAGIC = 'PTFEAT1\n';

/** The default cache directory: $PARATRAIN_CACHE, else $XDG_CACHE_HOME/paratrain, else ~/.cache/paratrain; then speech-features/. */
export function defaultSpeechCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const root = env.PARATRAIN_CACHE || join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'paratrain');
  return join(root, 'speech-features');
}

/** What identifies one WAV file's contents without reading it. */
export interface FileKey {
  path: string;
  size: number;
  mtimeMs: number;
}

interface Header {
  manifest: string;
  optionsHash: string;
  featureSize: number;
  entries: [string, number, number, number][];
}

const keyText = (k: FileKey): string => `${k.path}\u0000${k.size}\u0000${k.mtimeMs}`;

/** The cache of one manifest under one option set. */
export class FeatureCache {
  private readonly found = new Map<string, Float32Array>();
  private readonly current = new Map<string, { key: FileKey; data: Float32Array }>();
  private changed = false;
  /** why an existing cache file was not used (for a log line), if it was not */
  readonly ignored?: string;

  /** The cache file for `manifestPath` in `dir` under `optionsHash`. */
  static fileFor(dir: string, manifestPath: string, optionsHash: string): string {
    const m = createHash('sha256').update(resolve(manifestPath)).digest('hex').slice(0, 16);
    return join(dir, `${m}-${optionsHash}.feat`);
  }

  constructor(
    readonly file: string,
    readonly manifest: string,
    readonly optionsHash: string,
    readonly featureSize: number,
  ) {
    let bytes: Buffer;
    try {
      bytes = readFileSync(file);
    } catch {
      return; // no cache yet
    }
    try {
      this.load(bytes);
    } catch (e) {
      this.found.clear();
      this.ignored = `ignoring the damaged feature cache ${file} (${(e as Error).message}); it will be rewritten`;
    }
  }

  private load(bytes: Buffer): void {
    if (bytes.length < MAGIC.length + 4 || bytes.toString('latin1', 0, MAGIC.length) !== MAGIC)
      throw new Error('not a paratrain feature cache');
    const headerBytes = bytes.readUInt32LE(MAGIC.length);
    const dataStart = MAGIC.length + 4 + headerBytes;
    if (headerBytes % 4 !== 0 || dataStart > bytes.length) throw new Error('its header runs past the end of the file');
    const header = JSON.parse(bytes.toString('utf8', MAGIC.length + 4, dataStart)) as Header;
    if (
      header.optionsHash !== this.optionsHash ||
      header.featureSize !== this.featureSize ||
      !Array.isArray(header.entries)
    ) {
      throw new Error('its header does not match its name');
    }
    let frames = 0;
    for (const e of header.entries) {
      if (!Array.isArray(e) || e.length !== 4 || !Number.isInteger(e[3]) || e[3] < 0)
        throw new Error('a malformed entry');
      frames += e[3];
    }
    if (bytes.length - dataStart !== frames * this.featureSize * 4)
      throw new Error(
        `it holds ${bytes.length - dataStart} bytes of features, its header lists ${frames * this.featureSize * 4}`,
      );
    // one aligned copy, then views per entry
    const all = new Float32Array(frames * this.featureSize);
    new Uint8Array(all.buffer).set(bytes.subarray(dataStart));
    let at = 0;
    for (const [path, size, mtimeMs, n] of header.entries) {
      const len = n * this.featureSize;
      this.found.set(keyText({ path, size, mtimeMs }), all.subarray(at, at + len));
      at += len;
    }
  }

  /** The cached features of `key`, if its file is unchanged; remembers it for save(). */
  get(key: FileKey): Float32Array | undefined {
    const data = this.found.get(keyText(key));
    if (data) this.current.set(keyText(key), { key, data });
    return data;
  }

  /** Records freshly computed features of `key`. */
  put(key: FileKey, data: Float32Array): void {
    this.current.set(keyText(key), { key, data });
    this.changed = true;
  }

  /** Entries of the file that this run did not ask for (removed from the manifest, or changed files). */
  private stale(): boolean {
    for (const k of this.found.keys()) if (!this.current.has(k)) return true;
    return false;
  }

  /**
   * Writes what this run used (the entries read from it, then those computed) when anything changed: to a temporary
   * file, then renamed over the old one, so readers never see half a file. Returns an error message
   * instead of throwing: a cache that cannot be written only costs time.
   */
  save(): string | undefined {
    if (!this.changed && !this.stale() && this.ignored === undefined) return undefined;
    const entries = [...this.current.values()];
    const header: Header = {
      manifest: resolve(this.manifest),
      optionsHash: this.optionsHash,
      featureSize: this.featureSize,
      entries: entries.map(({ key, data }) => [key.path, key.size, key.mtimeMs, data.length / this.featureSize]),
    };
    let json = JSON.stringify(header);
    while (Buffer.byteLength(json) % 4 !== 0) json += ' ';
    const head = Buffer.alloc(MAGIC.length + 4);
    head.write(MAGIC, 'latin1');
    head.writeUInt32LE(Buffer.byteLength(json), MAGIC.length);
    const parts: Uint8Array[] = [head, Buffer.from(json)];
    for (const { data } of entries) parts.push(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    const tmp = `${this.file}.tmp-${process.pid}`;
    try {
      mkdirSync(join(this.file, '..'), { recursive: true });
      writeFileSync(tmp, Buffer.concat(parts));
      renameSync(tmp, this.file);
    } catch (e) {
      rmSync(tmp, { force: true });
      return `could not write the feature cache ${this.file} (${(e as Error).message}); features will be computed again next time`;
    }
    return undefined;
  }
}
