/**
 * The run directory's lock: one writer at a time. Process 0 of a run (new or resumed) creates
 * `RUN_DIR/.lock` with O_EXCL before it looks inside the directory (the non-empty check, a resume's
 * cleanup of leftovers) and removes it when the run ends, normally, on an error or on exit. The file
 * names its holder: pid, host and since when (and, on Linux, the boot and the process's start time,
 * so a pid reused by another process, or by a restarted container's run, is not taken for the holder).
 *
 * A lock whose holder is gone (this host, and its process is dead) is taken over with one line naming
 * it; a live holder, or one on another host (which cannot be checked), is a refusal naming the holder
 * and the fix.
 */
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { writeError } from './writeError.ts';

export const LOCK_FILE = '.lock';
/** Held for the moment of a takeover, so two runs that find the same dead holder cannot both replace it. */
const TAKEOVER_FILE = '.lock.takeover';

/** What RUN_DIR/.lock holds. */
export interface LockHolder {
  pid: number;
  host: string;
  /** ISO time the lock was taken */
  since: string;
  /** Linux: /proc/sys/kernel/random/boot_id and the process's start time in clock ticks since boot */
  boot?: string;
  started?: number;
}

type Liveness = 'alive' | 'dead' | 'elsewhere';

function readProc(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** A process's start time in clock ticks since boot (field 22 of /proc/PID/stat), where Linux says. */
function startTicks(pid: number | 'self'): number | undefined {
  const stat = readProc(`/proc/${pid}/stat`);
  // the command name (field 2) is in parentheses and may hold spaces: count fields after its ')'
  const fields = stat?.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields?.[19]);
  return Number.isFinite(ticks) ? ticks : undefined;
}

const bootId = (): string | undefined => readProc('/proc/sys/kernel/random/boot_id')?.trim();

function me(): LockHolder {
  const boot = bootId(),
    started = startTicks('self');
  return {
    pid: process.pid,
    host: hostname(),
    since: new Date().toISOString(),
    ...(boot !== undefined && started !== undefined ? { boot, started } : {}),
  };
}

/** Whether the holder still runs: it can be known only on this host. */
function liveness(h: LockHolder): Liveness {
  if (h.host !== hostname()) return 'elsewhere';
  const boot = bootId();
  if (h.boot !== undefined && boot !== undefined && h.boot !== boot) return 'dead'; // the machine rebooted since
  try {
    process.kill(h.pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ESRCH') return 'dead';
  }
  // the pid runs: the holder's own process, unless it started at another time (a reused pid)
  const started = h.started !== undefined ? startTicks(h.pid) : undefined;
  return started !== undefined && started !== h.started ? 'dead' : 'alive';
}

const describe = (h: LockHolder) => `pid ${h.pid} on host ${h.host}, since ${h.since}`;
const sameHolder = (a: LockHolder, b: LockHolder) => a.pid === b.pid && a.host === b.host && a.since === b.since;

/** The lock file's holder; 'none' when there is no lock, 'unreadable' when it is empty or damaged. */
function readHolder(path: string): LockHolder | 'none' | 'unreadable' {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'none' : 'unreadable';
  }
  try {
    const h = JSON.parse(text) as LockHolder;
    return Number.isInteger(h.pid) && typeof h.host === 'string' && typeof h.since === 'string' ? h : 'unreadable';
  } catch {
    return 'unreadable';
  }
}

/** Creates `path` holding `holder`, or returns false when it exists. */
function tryCreate(path: string, holder: LockHolder): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'wx');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw writeError(path, e, { afterFix: 'run again' });
  }
  try {
    writeSync(fd, `${JSON.stringify(holder)}\n`);
  } catch (e) {
    closeSync(fd);
    unlinkSync(path);
    throw writeError(path, e, { afterFix: 'run again' });
  }
  closeSync(fd);
  return true;
}

const pause = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/**
 * Replaces the dead holder's lock with ours, under the takeover file. False when another run got
 * there first (the caller looks at the lock again).
 */
function takeOver(dir: string, path: string, dead: LockHolder, holder: LockHolder): boolean {
  const guard = join(dir, TAKEOVER_FILE);
  if (!tryCreate(guard, holder)) {
    // a takeover in progress, or one whose process died in it (then its guard goes)
    const other = readHolder(guard);
    if (other !== 'none' && other !== 'unreadable' && liveness(other) === 'dead') removeQuietly(guard);
    return false;
  }
  try {
    const now = readHolder(path);
    if (now !== 'none' && (now === 'unreadable' || !sameHolder(now, dead))) return false;
    removeQuietly(path);
    return tryCreate(path, holder);
  } finally {
    removeQuietly(guard);
  }
}

function removeQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    /* gone already */
  }
}

/** A taken lock; release() removes it (once; and only while it is still ours). */
export class RunLock {
  private held = true;
  private readonly onExit = () => this.release();

  constructor(
    readonly path: string,
    private readonly holder: LockHolder,
  ) {
    // process.exit() (a second Ctrl-C) or an uncaught error still frees the directory
    process.on('exit', this.onExit);
  }

  release(): void {
    if (!this.held) return;
    this.held = false;
    process.off('exit', this.onExit);
    const now = readHolder(this.path);
    if (now !== 'none' && now !== 'unreadable' && sameHolder(now, this.holder)) removeQuietly(this.path);
  }
}

/**
 * Takes `dir`'s lock (the directory exists). Throws one line naming the holder and the fix when
 * another run holds it; takes over, saying so through `log`, a lock whose holder is gone.
 */
export function lockRunDir(dir: string, log?: (message: string) => void): RunLock {
  const path = join(dir, LOCK_FILE);
  const holder = me();
  // a lock just created is empty for a moment, and a takeover by another run takes a moment: look again
  for (let attempt = 0; attempt < 50; attempt++, pause(20)) {
    if (tryCreate(path, holder)) return new RunLock(path, holder);
    const other = readHolder(path);
    if (other === 'none' || other === 'unreadable') {
      if (other === 'unreadable' && attempt === 49)
        throw new Error(
          `run directory ${dir} is locked (${path}), and the lock does not say by whom; if no run uses ${dir}, remove ${path} and run again`,
        );
      continue;
    }
    const state = liveness(other);
    if (state === 'alive')
      throw new Error(
        `run directory ${dir} is in use by another run (${describe(other)}); wait for it to end, or, if that process is gone, remove ${path}`,
      );
    if (state === 'elsewhere')
      throw new Error(
        `run directory ${dir} is in use by a run on another host (${describe(other)}), which this host cannot check; wait for it to end, or, if that process is gone, remove ${path}`,
      );
    if (takeOver(dir, path, other, holder)) {
      log?.(`run directory ${dir}: took over the lock of a run that is gone (${describe(other)})`);
      return new RunLock(path, holder);
    }
  }
  throw new Error(
    `run directory ${dir}: could not take its lock (${path}) while other runs took it over; wait for them, then run again`,
  );
}

/** The one run directory lock a run takes (process 0 only), released when the run ends. */
export class RunLockHolder {
  private lock: RunLock | null = null;

  constructor(private readonly log?: (message: string) => void) {}

  /** Takes `dir`'s lock; a run holds one directory's, so a second call for the same directory does nothing. */
  take(dir: string): void {
    if (this.lock) {
      if (this.lock.path === join(dir, LOCK_FILE)) return;
      throw new Error(`a run locks one run directory; it holds ${this.lock.path} and was asked for ${dir}`);
    }
    this.lock = lockRunDir(dir, this.log);
  }

  release(): void {
    this.lock?.release();
    this.lock = null;
  }
}
