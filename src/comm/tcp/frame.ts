/**
 * The wire format of the tcp transport: every byte on a paratrain connection is part of a frame.
 *
 *   offset  size  field
 *        0     4  magic        0x31525450, the bytes "PTR1" (the protocol's version is in the Hello)
 *        4     1  type         FrameType
 *        5     1  flags        reduce op of a collective (0 sum, 1 mean)
 *        6     2  arg          broadcast root; 0 otherwise
 *        8     4  seq          frame number on this connection in this direction, from 0 (a gap,
 *                              replay or reorder is an error)
 *       12     4  tag          collective sequence number, or the send/recv tag
 *       16     4  aux          a collective's element count (every rank must pass the same), or
 *                              a point-to-point message's element count
 *       20     4  length       payload bytes; at most the receiver's maximum frame size
 *       24     4  check        checksum of the payload: for data frames (collectives, send/recv) the
 *                              SIMD hash "ptr32" of dataPath.ts; for control frames CRC32
 *       28     4  headerCrc    CRC32 (zlib's) of bytes 0–27, so a corrupt length is caught before use
 *
 * All fields little-endian; payload floats are IEEE float32 little-endian (big-endian hosts are
 * refused at connect). Control frames (handshake, rendezvous, abort) carry UTF-8 JSON payloads;
 * data frames carry raw float32 bytes.
 *
 * The decoder of a byte stream into frames is frameDecoder.ts.
 */
import { crc32 } from 'node:zlib';
import { hashPayloadJs } from './dataPath.ts';

export const MAGIC = 0x31525450;
export const HEADER_BYTES = 32;
/** frames before authentication are small JSON messages: anything larger is dropped */
export const PRE_AUTH_MAX_FRAME = 4096;

export const FrameType = {
  /** dialer → acceptor: who I am, my nonce */
  Hello: 1,
  /** acceptor → dialer: my nonce, my proof on yours */
  Challenge: 2,
  /** dialer → acceptor: my proof on yours */
  Proof: 3,
  /** acceptor → dialer: authenticated */
  Welcome: 4,
  /** either way: refused, with a message; the sender closes the connection */
  Refuse: 5,
  /** rank → master: my data address, config hash, limits */
  Register: 6,
  /** master → rank: every rank's address */
  Table: 7,
  /** collective data; tag = collective sequence number */
  Allreduce: 16,
  ReduceScatter: 17,
  Allgather: 18,
  Broadcast: 19,
  Barrier: 20,
  /** point-to-point data; tag = user tag */
  P2P: 24,
  /** the stall inspector's probe, "where are you?" (tag: probe id; no payload), sent only when a wait passes the threshold */
  Where: 26,
  /** the answer to a Where: JSON { entered, calls, last, step } (whereabouts.ts) */
  Here: 27,
  /** the job is aborted: JSON { origin, reason, blames?, waitedMs? } (a timeout: whom it waited for, how long) */
  Abort: 30,
  /** clean close of the sender's communicator */
  Bye: 31,
} as const;
export type FrameType = (typeof FrameType)[keyof typeof FrameType];

const TYPE_NAMES: Record<number, string> = {
  1: 'hello',
  2: 'challenge',
  3: 'proof',
  4: 'welcome',
  5: 'refuse',
  6: 'register',
  7: 'table',
  16: 'allreduce',
  17: 'reduceScatter',
  18: 'allgather',
  19: 'broadcast',
  20: 'barrier',
  24: 'send/recv',
  26: 'where',
  27: 'here',
  30: 'abort',
  31: 'bye',
};

export function frameTypeName(type: number): string {
  return TYPE_NAMES[type] ?? `unknown type ${type}`;
}

/** Whether `type` is a FrameType of this protocol version. */
export function isFrameType(type: number): boolean {
  return type in TYPE_NAMES;
}

export interface FrameHeader {
  type: number;
  flags: number;
  arg: number;
  seq: number;
  tag: number;
  aux: number;
  length: number;
}

export interface Frame extends FrameHeader {
  payload: Buffer;
  /** the payload's verified checksum (reusable when forwarding the same bytes) */
  check: number;
  /** the payload is a payload slot (data frames decoded with a data path): reduce it there, then putSlot */
  slot?: boolean;
  /** the payload was read straight into the place the decoder's `landing` gave (see landing.ts) */
  landed?: boolean;
}

/** Frames carrying float32 data (checked with the ptr32 hash; payloads in payload slots). */
export function isDataType(type: number): boolean {
  return type >= FrameType.Allreduce && type <= FrameType.P2P;
}

/** The check of an empty data payload. */
export const EMPTY_DATA_CHECK = hashPayloadJs(new Uint8Array(0));

/** Malformed, oversized or out-of-sequence traffic; the connection it came on must be dropped. */
export class FrameError extends Error {
  override readonly name = 'FrameError';
}

/** The 32-byte header for a payload whose CRC is `payloadCrc`. */
export function encodeHeader(h: FrameHeader, payloadCrc: number): Buffer {
  const b = Buffer.allocUnsafe(HEADER_BYTES);
  b.writeUInt32LE(MAGIC, 0);
  b.writeUInt8(h.type, 4);
  b.writeUInt8(h.flags, 5);
  b.writeUInt16LE(h.arg, 6);
  b.writeUInt32LE(h.seq >>> 0, 8);
  b.writeUInt32LE(h.tag >>> 0, 12);
  b.writeUInt32LE(h.aux >>> 0, 16);
  b.writeUInt32LE(h.length >>> 0, 20);
  b.writeUInt32LE(payloadCrc >>> 0, 24);
  b.writeUInt32LE(crc32(b.subarray(0, 28)) >>> 0, 28);
  return b;
}

/** The checksum a frame of `type` carries for `payload` (without a data path: the JS reference hash). */
export function payloadCheck(type: number, payload: Uint8Array): number {
  if (isDataType(type)) return payload.length === 0 ? EMPTY_DATA_CHECK : hashPayloadJs(payload);
  return payload.length === 0 ? 0 : crc32(payload) >>> 0;
}

/** Header + payload as one buffer (control frames, tests). */
export function encodeFrame(h: Omit<FrameHeader, 'length'>, payload: Uint8Array = Buffer.alloc(0)): Buffer {
  return Buffer.concat([encodeHeader({ ...h, length: payload.length }, payloadCheck(h.type, payload)), payload]);
}

/** Parses a control frame's JSON payload; FrameError if it is not a JSON object. */
export function parseJson(frame: Frame): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(frame.payload.toString('utf8'));
  } catch {
    throw new FrameError(`${frameTypeName(frame.type)} frame carries malformed JSON`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new FrameError(`${frameTypeName(frame.type)} frame is not a JSON object`);
  return v as Record<string, unknown>;
}
