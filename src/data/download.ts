import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

export interface DownloadOptions {
  /** expected MD5 of the downloaded bytes (hex); the file is kept only if it matches */
  md5?: string;
  /** give up if the server has not answered within this many ms (default 5000): offline machines fail fast */
  connectTimeoutMs?: number;
  /** give up if the body stalls for this many ms (default 30000) */
  idleTimeoutMs?: number;
}

/** Why a network error happened, in a few words (fetch hides the cause one level down). */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = (err as { cause?: unknown }).cause;
  if (cause && typeof cause === 'object') {
    const code = (cause as { code?: unknown }).code;
    const message = (cause as { message?: unknown }).message;
    if (typeof code === 'string') return `${err.message}: ${code}`;
    if (typeof message === 'string') return `${err.message}: ${message}`;
  }
  return err.message;
}

/**
 * Downloads `url` to `dest`: the bytes go to a temporary file beside it and are renamed into place
 * only after the MD5 matches, so an interrupted or corrupt download never looks like a good file.
 */
export async function downloadFile(url: string, dest: string, options: DownloadOptions = {}): Promise<void> {
  const { md5, connectTimeoutMs = 5000, idleTimeoutMs = 30000 } = options;
  const controller = new AbortController();
  let timedOut = '';
  let timer = setTimeout(() => {
    timedOut = `no answer within ${connectTimeoutMs} ms`;
    controller.abort();
  }, connectTimeoutMs);
  const chunks: Uint8Array[] = [];
  const hash = createHash('md5');
  try {
    const response = await fetch(url, { signal: controller.signal });
    if (!response.ok || !response.body) throw new Error(`HTTP ${response.status} ${response.statusText}`);
    const reader = response.body.getReader();
    for (;;) {
      clearTimeout(timer);
      timer = setTimeout(() => {
        timedOut = `download stalled for ${idleTimeoutMs} ms`;
        controller.abort();
      }, idleTimeoutMs);
      const { done, value } = await reader.read();
      if (done) break;
      hash.update(value);
      chunks.push(value);
    }
  } catch (err) {
    throw new Error(`download of ${url} failed: ${timedOut || describe(err)}`);
  } finally {
    clearTimeout(timer);
  }
  const actual = hash.digest('hex');
  if (md5 && actual !== md5.toLowerCase()) {
    throw new Error(
      `download of ${url} failed: MD5 ${actual} does not match the published ${md5}; the file was not saved (a proxy or mirror may have altered it)`,
    );
  }
  mkdirSync(dirname(dest), { recursive: true });
  const tmp = `${dest}.${process.pid}.${randomBytes(4).toString('hex')}.part`;
  try {
    writeFileSync(tmp, Buffer.concat(chunks));
    renameSync(tmp, dest);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}
