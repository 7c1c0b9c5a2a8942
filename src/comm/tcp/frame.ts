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
 * FrameDecoder turns a byte stream into frames — pushed to it in chunks, or pulled (the socket
 * reads where readTarget() says, see PullReader) — and throws FrameError on anything malformed:
 * wrong magic, header checksum, unknown type, oversized length, sequence gap, payload checksum.
 * The connection is then dropped by its owner: a stream cannot be resynchronised.
 */
import { crc32 } from 'node:zlib';
import { HASH_STRIPE, hashPayloadJs, newHashLanes, resetHashLanes, type TcpDataPath } from './dataPath.ts';

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

const EMPTY_DATA_CHECK = hashPayloadJs(new Uint8Array(0));

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

/**
 * Incremental decoder for one direction of one connection. `push` each chunk read from the
 * socket; complete frames come out through `onFrame` in order. Data-frame payloads are copied into
 * fresh buffers whose byteOffset is 0, so they can be viewed as Float32Array.
 */
export class FrameDecoder {
  /** bytes of the current header collected so far */
  private readonly head = Buffer.allocUnsafe(HEADER_BYTES);
  private headFill = 0;
  private header: FrameHeader | undefined;
  private expectedCrc = 0;
  private payload: Buffer | undefined;
  private payloadFill = 0;
  private runningCrc = 0;
  private isData = false;
  private inSlot = false;
  private landed = false;
  private hashed = 0;
  private lanes: Uint32Array | undefined;
  private nextSeq = 0;
  private failed = false;
  /** a data frame's header is in and its payload waits: see `hold` */
  private held = false;
  /** after authentication: data payloads go to slots of this data path, hashed as they arrive */
  dataPath: TcpDataPath | undefined;
  /**
   * Asked for each data frame once its header is in (only with the native data path,
   * which hashes any memory): bytes of exactly the payload's length to read it into, or undefined
   * for a slot.
   */
  landing: ((h: FrameHeader) => Buffer | undefined) | undefined;
  /**
   * Asked for each data frame once its header is in (pull mode, only where the header ended the
   * bytes given): true holds the frame there, before its payload — heldHeader — until release()
   * reads it on, or takeHeld() gives it to whoever reads the socket past this decoder.
   */
  hold: ((h: FrameHeader) => boolean) | undefined;

  constructor(
    /** the largest payload accepted; may be raised later (after authentication) */
    public maxFrameBytes: number,
    private readonly onFrame: (frame: Frame) => void,
    /** types accepted; anything else is a FrameError */
    public allowedTypes?: ReadonlySet<number>,
  ) {}

  /** Between frames (nothing of the next one read yet) and usable. */
  get idle(): boolean {
    return !this.failed && !this.header && this.headFill === 0;
  }

  /** In the middle of a payload (readTarget() is part of it). */
  get inPayload(): boolean {
    return !this.failed && this.header !== undefined && !this.held;
  }

  /** The header of the frame held before its payload, if any (see `hold`). */
  get heldHeader(): FrameHeader | undefined {
    return this.held && !this.failed ? this.header : undefined;
  }

  /** Reads the held frame on: its payload is the next input. */
  release(): void {
    if (!this.heldHeader) return;
    this.held = false;
    this.startPayload(this.header!);
  }

  /**
   * Gives the held frame away: returns its 32 header bytes and forgets it, as if it had never been
   * read (expectedSeq is its sequence number again). Undefined when nothing is held.
   */
  takeHeld(): Buffer | undefined {
    const h = this.heldHeader;
    if (!h) return undefined;
    this.held = false;
    this.header = undefined;
    this.nextSeq = h.seq;
    return Buffer.from(this.head);
  }

  /** The sequence number the next frame must carry (the native ring reads frames past this decoder). */
  get expectedSeq(): number {
    return this.nextSeq;
  }

  set expectedSeq(seq: number) {
    this.nextSeq = seq >>> 0;
  }

  /** Throws FrameError; after one, the decoder refuses further input. */
  push(chunk: Buffer): void {
    if (this.failed) return;
    try {
      this.consume(chunk);
    } catch (err) {
      this.failed = true;
      throw err;
    }
  }

  private consume(chunk: Buffer): void {
    let off = 0;
    while (off < chunk.length) {
      if (this.held) this.release(); // bytes past a header are in: it cannot be held
      const target = this.readTarget();
      const take = Math.min(target.length, chunk.length - off);
      chunk.copy(target, 0, off, off + take);
      off += take;
      this.advance(take);
    }
  }

  /**
   * Pull mode (a socket created with `onread`, see PullReader): where the next bytes should be
   * read to — the rest of the header, or the rest of the payload, which for data frames is a
   * payload slot: the OS kernel writes the payload straight where it will be reduced.
   */
  readTarget(): Buffer {
    if (this.failed || this.held) return this.head;
    if (!this.header) return this.head.subarray(this.headFill);
    return this.payload!.subarray(this.payloadFill);
  }

  /** Pull mode: `n` bytes have been written into the buffer readTarget() returned. Throws FrameError. */
  didRead(n: number): void {
    if (this.failed) return;
    try {
      this.advance(n);
    } catch (err) {
      this.failed = true;
      throw err;
    }
  }

  private advance(take: number): void {
    if (!this.header) {
      this.headFill += take;
      // reject a foreign protocol as soon as 4 bytes are in
      if (this.headFill >= 4 && this.headFill - take < 4 && this.head.readUInt32LE(0) !== MAGIC) {
        throw new FrameError(`not a paratrain frame (bad magic ${describeBytes(this.head.subarray(0, 4))})`);
      }
      if (this.headFill < HEADER_BYTES) return;
      this.headFill = 0;
      this.header = this.parseHeader();
      const len = this.header.length;
      this.isData = isDataType(this.header.type);
      if (len === 0) {
        const check = this.isData ? EMPTY_DATA_CHECK : 0;
        if (check !== this.expectedCrc) throw this.mismatch(0, check);
        this.emit(Buffer.alloc(0), check, false);
        return;
      }
      if (this.isData && len % 4 !== 0)
        throw new FrameError(`${frameTypeName(this.header.type)} frame of ${len} bytes: not whole float32s`);
      if (this.isData && this.dataPath && this.hold?.(this.header)) this.held = true;
      else this.startPayload(this.header);
      return;
    }
    this.payloadBytes(take);
  }

  /** The header `h` is in: where its payload goes (landing, slot or a buffer of its own). */
  private startPayload(h: FrameHeader): void {
    const len = h.length;
    if (this.isData && this.dataPath) {
      const land = this.dataPath.native && this.landing ? this.landing(h) : undefined;
      this.landed = land !== undefined && land.length === len;
      this.payload = this.landed ? land! : this.dataPath.getSlot(len);
      this.inSlot = !this.landed;
      if (this.lanes) resetHashLanes(this.lanes);
      else this.lanes = newHashLanes();
      this.hashed = 0;
    } else {
      this.payload = Buffer.allocUnsafeSlow(len);
      this.inSlot = false;
      this.landed = false;
    }
    this.payloadFill = 0;
    this.runningCrc = 0;
  }

  private payloadBytes(take: number): void {
    const payload = this.payload!;
    // checksum the new bytes while they are in cache
    const hashing = this.inSlot || this.landed;
    if (hashing) {
      const upto = (this.payloadFill + take) & ~(HASH_STRIPE - 1);
      if (upto > this.hashed) {
        this.dataPath!.hashSlot(this.lanes!, payload, this.hashed, upto);
        this.hashed = upto;
      }
    } else if (!this.isData) {
      this.runningCrc = crc32(payload.subarray(this.payloadFill, this.payloadFill + take), this.runningCrc);
    }
    this.payloadFill += take;
    if (this.payloadFill === payload.length) {
      const len = payload.length;
      const check = hashing
        ? this.dataPath!.finish(this.lanes!, payload, this.hashed)
        : this.isData
          ? hashPayloadJs(payload)
          : this.runningCrc >>> 0;
      if (check !== this.expectedCrc) {
        if (this.inSlot) this.dataPath!.putSlot(payload);
        throw this.mismatch(len, check);
      }
      this.payload = undefined;
      this.emit(payload, check, this.inSlot, this.landed);
    }
  }

  private parseHeader(): FrameHeader {
    const b = this.head;
    const crc = crc32(b.subarray(0, 28)) >>> 0;
    if (crc !== b.readUInt32LE(28)) throw new FrameError('header checksum mismatch (corrupt or foreign data)');
    const h: FrameHeader = {
      type: b.readUInt8(4),
      flags: b.readUInt8(5),
      arg: b.readUInt16LE(6),
      seq: b.readUInt32LE(8),
      tag: b.readUInt32LE(12),
      aux: b.readUInt32LE(16),
      length: b.readUInt32LE(20),
    };
    if (!(h.type in TYPE_NAMES) || (this.allowedTypes && !this.allowedTypes.has(h.type))) {
      throw new FrameError(`unexpected frame type ${frameTypeName(h.type)} here`);
    }
    if (h.length > this.maxFrameBytes) {
      throw new FrameError(
        `oversized ${frameTypeName(h.type)} frame: ${h.length} bytes, the maximum here is ${this.maxFrameBytes}`,
      );
    }
    if (h.seq !== this.nextSeq) {
      throw new FrameError(`frame sequence gap: got #${h.seq}, expected #${this.nextSeq} (replayed or lost frame)`);
    }
    this.nextSeq = (this.nextSeq + 1) >>> 0;
    this.expectedCrc = b.readUInt32LE(24);
    return h;
  }

  private mismatch(len: number, got: number): FrameError {
    const h = this.header!;
    return new FrameError(
      `payload checksum mismatch in ${frameTypeName(h.type)} frame #${h.seq} ` +
        `(${len} bytes: got ${got.toString(16)}, the header says ${this.expectedCrc.toString(16)})`,
    );
  }

  private emit(payload: Buffer, check: number, slot: boolean, landed = false): void {
    const h = this.header!;
    this.header = undefined;
    this.onFrame({ ...h, payload, check, slot, landed });
  }
}

function describeBytes(b: Buffer): string {
  const printable = [...b].every((c) => c >= 0x20 && c < 0x7f);
  return printable ? JSON.stringify(b.toString('latin1')) : `0x${b.toString('hex')}`;
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
