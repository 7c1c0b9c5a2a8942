/** The argument checks of the shm calls: each misuse is a ShmUsageError naming the call and what it expected. */
import type { ReduceOp } from '../communicator.ts';
import { REDOPS } from './callDescriptor.ts';
import { ShmUsageError } from './errors.ts';

/** The reduce op's code in the call descriptor. */
export function reduceOpCode(op: ReduceOp): number {
  const i = REDOPS.indexOf(op);
  if (i < 0) throw new ShmUsageError(`reduce op must be one of ${REDOPS.join(', ')}, got ${String(op)}`);
  return i;
}

export function checkBuffer(buf: Float32Array, what: string): void {
  if (!(buf instanceof Float32Array))
    throw new ShmUsageError(`${what}: expected a Float32Array, got ${describeValue(buf)}`);
}

export function checkRank(r: number, size: number, what: string): void {
  if (!Number.isInteger(r) || r < 0 || r >= size)
    throw new ShmUsageError(`${what} must be a rank in 0..${size - 1}, got ${r}`);
}

export function checkTag(tag: number): void {
  if (!Number.isInteger(tag) || tag < -(2 ** 31) || tag >= 2 ** 31)
    throw new ShmUsageError(`tag must be a 32-bit integer, got ${tag}`);
}

/** An error as one line: its name and message. */
export function errorText(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}

/** What a wrong argument is, for messages: null, its class's name, or its type. */
export function describeValue(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'object') return (v as object).constructor?.name ?? 'an object';
  return typeof v;
}
