/**
 * One line for a write that failed: what the file system said, the file, and what to do. A full disk
 * in the middle of a run ends it with "no space left on device writing runs/a/metrics.jsonl: free
 * space on that disk and resume the run", not with Node's bare "ENOSPC: no space left on device, write".
 */
import { dirname } from 'node:path';

/** The failures a user can fix, by error code: what happened and the fix, for the file at `path`. */
const FIXABLE: Record<string, (path: string) => [what: string, fix: string]> = {
  ENOSPC: () => ['no space left on device', 'free space on that disk'],
  EDQUOT: () => ['disk quota exceeded', 'free space or raise the quota'],
  EACCES: (path) => ['permission denied', `make ${dirname(path)} writable for this user`],
  EPERM: (path) => ['operation not permitted', `make ${dirname(path)} writable for this user`],
  EROFS: () => ['read-only file system', 'remount it read-write, or move the run to a writable disk'],
  EFBIG: () => ['file too large', 'raise the file size limit (ulimit -f)'],
};

export interface WriteErrorOptions {
  /** what to do once it is fixed; default 'resume the run' */
  afterFix?: string;
  /** what the file is, before its path ('checkpoint'); default nothing */
  kind?: string;
}

/** The error for a failed write of `path`; failures not in the list keep Node's message after "cannot write PATH". */
export function writeError(path: string, e: unknown, opts: WriteErrorOptions = {}): Error {
  const file = opts.kind ? `${opts.kind} ${path}` : path;
  const code = (e as NodeJS.ErrnoException).code;
  const fixable = code !== undefined && Object.hasOwn(FIXABLE, code) ? FIXABLE[code]!(path) : null;
  if (!fixable) return new Error(`cannot write ${file}: ${(e as Error).message}`, { cause: e });
  const [what, fix] = fixable;
  return new Error(`${what} writing ${file}: ${fix} and ${opts.afterFix ?? 'resume the run'}`, { cause: e });
}
