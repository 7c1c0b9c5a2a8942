/**
 * Checkpoints in the safetensors format, so Python's `safetensors` (and everything built on it) reads them:
 *
 *   [8 bytes: N, u64 little-endian][N bytes: UTF-8 JSON header, space-padded to a multiple of 8][data]
 *
 * The header maps each tensor name to `{ "dtype": "F32", "shape": [...], "data_offsets": [begin, end] }`
 * (byte offsets into the data that follows the header) plus an optional `"__metadata__"` map of strings.
 * We write tensors contiguously in the order given; we read only F32 and check every offset, so a
 * truncated or damaged file is an error that names the file, never a wrong tensor.
 *
 * Writes are atomic: the bytes go to `<path>.tmp-<pid>`, are fsynced, then renamed over `<path>`.
 */
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { endianness } from 'node:os';
import { crashPoint } from '../faults/crashPoints.ts';
import { writeError } from '../files/writeError.ts';

/** One tensor of a checkpoint: its name ('layers.3.kernel'), shape and float32 values. */
export interface CheckpointTensor {
  name: string;
  shape: number[];
  data: Float32Array;
}

/** A checkpoint as read: its tensors by name and its string metadata (the config under 'config'). */
export interface Checkpoint {
  /** in file order */
  tensors: Map<string, { shape: number[]; data: Float32Array }>;
  metadata: Record<string, string>;
}

const LITTLE_ENDIAN = endianness() === 'LE';
/** The safetensors reference implementation refuses larger headers; so do we. */
const MAX_HEADER = 100 * 1024 * 1024;

function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Little-endian bytes of a Float32Array (a view on little-endian hosts, a copy otherwise). */
function leBytes(data: Float32Array): Uint8Array {
  if (LITTLE_ENDIAN) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const out = new Uint8Array(data.byteLength);
  const view = new DataView(out.buffer);
  for (let i = 0; i < data.length; i++) view.setFloat32(i * 4, data[i]!, true);
  return out;
}

function writeAll(fd: number, bytes: Uint8Array): void {
  let off = 0;
  while (off < bytes.byteLength) off += writeSync(fd, bytes, off, bytes.byteLength - off);
}

/** The encoded header (length prefix included) for these tensors and metadata. */
function encodeHeader(tensors: readonly CheckpointTensor[], metadata: Record<string, string>): Uint8Array {
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header.__metadata__ = { ...metadata };
  let offset = 0;
  for (const t of tensors) {
    const bytes = t.data.length * 4;
    header[t.name] = { dtype: 'F32', shape: [...t.shape], data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const n = Math.ceil(json.length / 8) * 8;
  const out = new Uint8Array(8 + n).fill(0x20);
  new DataView(out.buffer).setBigUint64(0, BigInt(n), true);
  out.set(json, 8);
  return out;
}

function checkTensors(path: string, tensors: readonly CheckpointTensor[], metadata: Record<string, string>): void {
  const seen = new Set<string>();
  for (const t of tensors) {
    if (typeof t.name !== 'string' || t.name.length === 0)
      throw new Error(`checkpoint ${path}: every tensor needs a non-empty name`);
    if (t.name === '__metadata__')
      throw new Error(`checkpoint ${path}: '__metadata__' is reserved and cannot name a tensor`);
    if (seen.has(t.name)) throw new Error(`checkpoint ${path}: two tensors are named '${t.name}'`);
    seen.add(t.name);
    if (!Array.isArray(t.shape) || !t.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      throw new Error(
        `checkpoint ${path}: tensor '${t.name}' has shape ${JSON.stringify(t.shape)}; expected non-negative integers`,
      );
    }
    if (!(t.data instanceof Float32Array))
      throw new Error(`checkpoint ${path}: tensor '${t.name}' data must be a Float32Array`);
    if (elementCount(t.shape) !== t.data.length) {
      throw new Error(
        `checkpoint ${path}: tensor '${t.name}' has shape [${t.shape.join(', ')}] (${elementCount(t.shape)} values) but ${t.data.length} values of data`,
      );
    }
  }
  for (const [k, v] of Object.entries(metadata)) {
    if (typeof v !== 'string') throw new Error(`checkpoint ${path}: metadata '${k}' must be a string, got ${typeof v}`);
  }
}

/**
 * Writes `tensors` (F32, in this order) and string `metadata` to `path` in the safetensors format.
 * Atomic: either the old file or the complete new one is at `path`, never a partial file.
 */
export function writeCheckpoint(
  path: string,
  tensors: readonly CheckpointTensor[],
  metadata: Record<string, string> = {},
): void {
  checkTensors(path, tensors, metadata);
  const header = encodeHeader(tensors, metadata);
  const tmp = `${path}.tmp-${process.pid}`;
  let fd: number | undefined;
  try {
    fd = openSync(tmp, 'w');
    writeAll(fd, header);
    for (const t of tensors) writeAll(fd, leBytes(t.data));
    crashPoint('checkpoint-tmp');
    fsyncSync(fd);
    closeSync(fd);
    fd = undefined;
    renameSync(tmp, path);
  } catch (e) {
    if (fd !== undefined) {
      try {
        closeSync(fd);
      } catch {
        /* already failing */
      }
    }
    try {
      unlinkSync(tmp);
    } catch {
      /* never created */
    }
    throw writeError(path, e, { kind: 'checkpoint' });
  }
  // make the rename itself durable; not every platform can fsync a directory
  try {
    const dfd = openSync(dirname(path), 'r');
    try {
      fsyncSync(dfd);
    } finally {
      closeSync(dfd);
    }
  } catch {
    /* best effort */
  }
}

/** Reads a safetensors file of F32 tensors. Every problem is one line naming the file. */
export function readCheckpoint(path: string): Checkpoint {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new Error(`checkpoint ${path} not found`);
    throw new Error(`cannot read checkpoint ${path}: ${(e as Error).message}`, { cause: e });
  }
  return parseCheckpoint(bytes, path);
}

/**
 * Parses the bytes of a safetensors file of F32 tensors (`path` names it in errors). Every size in
 * the header is checked against the bytes given before anything is allocated.
 */
export function parseCheckpoint(bytes: Uint8Array, path: string): Checkpoint {
  const corrupt = (what: string) => new Error(`checkpoint ${path} is corrupt or truncated: ${what}`);

  if (bytes.length < 8) throw corrupt(`the file is ${bytes.length} bytes, too short to hold the 8-byte header length`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n64 = view.getBigUint64(0, true);
  if (n64 > BigInt(bytes.length - 8)) {
    throw corrupt(`the header length (${n64} bytes) reaches beyond the end of the file (${bytes.length} bytes)`);
  }
  const n = Number(n64);
  if (n > MAX_HEADER)
    throw corrupt(`the header length (${n} bytes) is larger than any real header (${MAX_HEADER} bytes at most)`);
  if (n < 2) throw corrupt(`the header length is ${n} bytes, too short for a JSON header`);

  let header: unknown;
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + n));
    if (!text.startsWith('{')) throw new Error('it does not start with {');
    header = JSON.parse(text);
  } catch (e) {
    throw corrupt(`the header is not valid JSON (${(e as Error).message})`);
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header))
    throw corrupt('the header is not a JSON object');

  const dataStart = 8 + n;
  const dataLength = bytes.length - dataStart;
  const metadata: Record<string, string> = {};
  const entries: { name: string; shape: number[]; begin: number; end: number }[] = [];
  for (const [name, info] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (info === null || typeof info !== 'object' || Array.isArray(info))
        throw corrupt('__metadata__ is not a map of strings');
      for (const [k, v] of Object.entries(info as Record<string, unknown>)) {
        if (typeof v !== 'string') throw corrupt(`__metadata__ '${k}' is not a string`);
        metadata[k] = v;
      }
      continue;
    }
    if (info === null || typeof info !== 'object') throw corrupt(`tensor '${name}' has no description`);
    const {
      dtype,
      shape,
      data_offsets: offsets,
    } = info as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (typeof dtype !== 'string') throw corrupt(`tensor '${name}' has no dtype`);
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      throw corrupt(`tensor '${name}' has shape ${JSON.stringify(shape)}; expected a list of non-negative integers`);
    }
    if (
      !Array.isArray(offsets) ||
      offsets.length !== 2 ||
      !offsets.every((o) => Number.isSafeInteger(o) && o >= 0) ||
      offsets[0] > offsets[1]
    ) {
      throw corrupt(
        `tensor '${name}' has data_offsets ${JSON.stringify(offsets)}; expected [begin, end] with 0 ≤ begin ≤ end`,
      );
    }
    if (dtype !== 'F32') {
      throw new Error(
        `checkpoint ${path}: tensor '${name}' has dtype ${dtype}, which paratrain does not read (only F32); convert it to float32`,
      );
    }
    const [begin, end] = offsets as [number, number];
    if (end > dataLength) {
      throw corrupt(
        `tensor '${name}' lies at bytes ${begin}..${end} of the data, but the data holds only ${dataLength} bytes`,
      );
    }
    const expected = elementCount(shape) * 4;
    if (end - begin !== expected) {
      throw corrupt(
        `tensor '${name}' has shape [${shape.join(', ')}] (${expected} bytes of F32) but its data_offsets span ${end - begin} bytes`,
      );
    }
    entries.push({ name, shape: shape as number[], begin, end });
  }

  // the data must be covered exactly once, without gaps (as the safetensors reference requires)
  const sorted = [...entries].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let at = 0;
  let prev: string | undefined;
  for (const e of sorted) {
    if (e.begin < at) throw corrupt(`tensors '${prev}' and '${e.name}' overlap (bytes ${e.begin}..${at})`);
    if (e.begin > at) throw corrupt(`bytes ${at}..${e.begin} of the data belong to no tensor`);
    at = e.end;
    prev = e.name;
  }
  if (at !== dataLength) throw corrupt(`${dataLength - at} bytes follow the last tensor`);

  const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const e of entries) {
    const count = (e.end - e.begin) / 4;
    const data = new Float32Array(count);
    if (LITTLE_ENDIAN) {
      new Uint8Array(data.buffer).set(bytes.subarray(dataStart + e.begin, dataStart + e.end));
    } else {
      for (let i = 0; i < count; i++) data[i] = view.getFloat32(dataStart + e.begin + i * 4, true);
    }
    tensors.set(e.name, { shape: [...e.shape], data });
  }
  return { tensors, metadata };
}
