/**
 * The job's shared secret: `secret` option, else `secretFile` option, else the PARATRAIN_SECRET
 * environment variable, else the file named by PARATRAIN_SECRET_FILE.
 *
 * Without any of them a world of more than one rank refuses to start (AuthenticationError
 * explaining how to set one) unless `allowInsecure` is set — then a fixed, public key is used:
 * the handshake still runs but proves nothing, and a warning says so. Meant for tests on a
 * trusted machine only. A world of one rank opens no socket and needs no secret.
 */
import { readFileSync, statSync } from 'node:fs';
import { AuthenticationError } from '../errors.ts';
import type { TcpLog } from './log.ts';

const INSECURE_KEY = Buffer.from('paratrain-insecure-public-key', 'utf8');

export interface SecretOptions {
  secret?: string | Uint8Array;
  secretFile?: string;
  allowInsecure?: boolean;
  worldSize: number;
  env: Record<string, string | undefined>;
}

function fromFile(path: string, origin: string, log: TcpLog): Buffer {
  let data: Buffer;
  try {
    data = readFileSync(path);
    const mode = statSync(path).mode;
    if (process.platform !== 'win32' && (mode & 0o077) !== 0) {
      log(
        'warn',
        `the secret file ${path} (${origin}) can be read by other users (mode ${(mode & 0o777).toString(8)}): chmod 600 it`,
      );
    }
  } catch (err) {
    throw new AuthenticationError(
      `cannot read the shared secret from ${path} (${origin}): ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  // one trailing newline (echo/openssl output) is not part of the secret
  const s = data.toString('utf8').replace(/\r?\n$/, '');
  if (!s) throw new AuthenticationError(`the secret file ${path} (${origin}) is empty`);
  return Buffer.from(s, 'utf8');
}

/**
 * Refuses a job of `worldSize` processes that has no usable secret in `env`, with the error its
 * connect() would throw, before the caller does any work (a run directory left behind by a refused
 * start would refuse the retry). Warnings about a secret that is usable stay with connect().
 */
export function checkSecret(worldSize: number, env: Record<string, string | undefined>): void {
  resolveSecret({ worldSize, env }, () => {});
}

export function resolveSecret(o: SecretOptions, log: TcpLog): Buffer {
  let key: Buffer | undefined;
  let origin = '';
  if (o.secret !== undefined) {
    key = typeof o.secret === 'string' ? Buffer.from(o.secret, 'utf8') : Buffer.from(o.secret);
    origin = 'the secret option';
    if (!key.length) throw new AuthenticationError('the secret option is empty');
  } else if (o.secretFile) {
    key = fromFile(o.secretFile, 'the secretFile option', log);
    origin = o.secretFile;
  } else if (o.env.PARATRAIN_SECRET) {
    key = Buffer.from(o.env.PARATRAIN_SECRET, 'utf8');
    origin = 'PARATRAIN_SECRET';
  } else if (o.env.PARATRAIN_SECRET_FILE) {
    key = fromFile(o.env.PARATRAIN_SECRET_FILE, 'PARATRAIN_SECRET_FILE', log);
    origin = o.env.PARATRAIN_SECRET_FILE;
  }
  if (key) {
    if (key.length < 16)
      log(
        'warn',
        `the shared secret from ${origin} is only ${key.length} bytes: use at least 16 random bytes (e.g. \`openssl rand -hex 32\`)`,
      );
    return key;
  }
  if (o.worldSize <= 1) return INSECURE_KEY;
  if (o.allowInsecure) {
    log(
      'warn',
      'no shared secret and allowInsecure is set: connections are NOT authenticated — anyone who can reach these ports can join or disturb the job',
    );
    return INSECURE_KEY;
  }
  throw new AuthenticationError(
    `a world of ${o.worldSize} ranks needs a shared secret so that only its own processes can connect: ` +
      'set PARATRAIN_SECRET to the same value on every host (e.g. `export PARATRAIN_SECRET=$(openssl rand -hex 32)`), ' +
      'or PARATRAIN_SECRET_FILE / the secretFile option to a file holding it; allowInsecure: true skips this on a trusted machine',
  );
}
