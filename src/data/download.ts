/**
 * One file over HTTP(S) into place, checked against its MD5. Written on node:http rather than
 * fetch so each phase has its own bound: the name lookup (a name server that does not answer means
 * offline), the server's answer, and a stalled body; a failure that means "no network" (a name that
 * does not resolve, a refused or unreachable address) ends the download at once.
 */
import { createHash, randomBytes } from 'node:crypto';
import { lookup as dnsLookup } from 'node:dns';
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { dirname } from 'node:path';

export interface DownloadOptions {
  /** expected MD5 of the downloaded bytes (hex); the file is kept only if it matches */
  md5?: string;
  /** give up if the name has not resolved within this many ms (default 2000): a silent name server means offline */
  lookupTimeoutMs?: number;
  /** give up if the server has not answered within this many ms (default 5000): offline machines fail fast */
  connectTimeoutMs?: number;
  /** give up if the body stalls for this many ms (default 30000) */
  idleTimeoutMs?: number;
  /** resolves host names (default: the system's, dns.lookup); tests inject one */
  lookup?: LookupFunction;
}

/** Redirects followed before giving up (a mirror may redirect once or twice). */
const MAX_REDIRECTS = 5;

/** Why a request failed, in a few words: Node's own message ("getaddrinfo ENOTFOUND host"), else its code. */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as NodeJS.ErrnoException).code;
  return err.message || code || err.name;
}

/** `lookup`, answering with an error when the name server has not answered within `ms`. */
function boundedLookup(lookup: LookupFunction, ms: number): LookupFunction {
  return (hostname, options, callback) => {
    let done = false;
    const timer = setTimeout(() => {
      done = true;
      callback(new Error(`no answer from the name server for ${hostname} within ${ms} ms`), '', 0);
    }, ms);
    lookup(hostname, options, (err, address, family) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      callback(err, address, family);
    });
  };
}

interface Bounds {
  lookup: LookupFunction;
  connectTimeoutMs: number;
  idleTimeoutMs: number;
}

/** The body of `url` (following redirects), each phase bounded; rejects with the reason in a few words. */
function getBytes(url: URL, bounds: Bounds, redirectsLeft: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const controller = new AbortController();
    let stopped = '';
    let settled = false;
    const stop = (reason: string) => {
      stopped = reason;
      controller.abort();
    };
    const settle = (err: Error | null, body?: Buffer | Promise<Buffer>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) reject(stopped ? new Error(stopped) : err);
      else resolve(body!);
    };
    let timer = setTimeout(() => stop(`no answer within ${bounds.connectTimeoutMs} ms`), bounds.connectTimeoutMs);
    const get = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = get(url, { signal: controller.signal, lookup: bounds.lookup }, (res: IncomingMessage) => {
      const status = res.statusCode ?? 0;
      const location = res.headers.location;
      if (status >= 300 && status < 400 && location) {
        res.resume();
        if (redirectsLeft === 0) settle(new Error(`more than ${MAX_REDIRECTS} redirects`));
        else settle(null, getBytes(new URL(location, url), bounds, redirectsLeft - 1));
        return;
      }
      if (status !== 200) {
        res.resume();
        settle(new Error(`HTTP ${status} ${res.statusMessage ?? ''}`.trim()));
        return;
      }
      const chunks: Buffer[] = [];
      const idle = () => {
        clearTimeout(timer);
        timer = setTimeout(() => stop(`download stalled for ${bounds.idleTimeoutMs} ms`), bounds.idleTimeoutMs);
      };
      idle();
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        idle();
      });
      res.on('end', () => settle(null, Buffer.concat(chunks)));
      res.on('error', (err) => settle(err));
      res.on('close', () => settle(new Error('the connection closed before the end of the file')));
    });
    req.on('error', (err) => settle(err));
    req.end();
  });
}

/**
 * Downloads `url` to `dest`: the bytes go to a temporary file beside it and are renamed into place
 * only after the MD5 matches, so an interrupted or corrupt download never looks like a good file.
 */
export async function downloadFile(url: string, dest: string, options: DownloadOptions = {}): Promise<void> {
  const { md5, lookupTimeoutMs = 2000, connectTimeoutMs = 5000, idleTimeoutMs = 30000 } = options;
  const lookup = boundedLookup(options.lookup ?? (dnsLookup as LookupFunction), lookupTimeoutMs);
  let body: Buffer;
  try {
    body = await getBytes(new URL(url), { lookup, connectTimeoutMs, idleTimeoutMs }, MAX_REDIRECTS);
  } catch (err) {
    throw new Error(`download of ${url} failed: ${describe(err)}`);
  }
  const actual = createHash('md5').update(body).digest('hex');
  if (md5 && actual !== md5.toLowerCase()) {
    throw new Error(
      `download of ${url} failed: MD5 ${actual} does not match the published ${md5}; the file was not saved (a proxy or mirror may have altered it)`,
    );
  }
  mkdirSync(dirname(dest), { recursive: true });
  const tmp = `${dest}.${process.pid}.${randomBytes(4).toString('hex')}.part`;
  try {
    writeFileSync(tmp, body);
    renameSync(tmp, dest);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}
