/**
 * The tcp transport's frame decoder (the format is frame.ts's).
 *
 * FrameDecoder turns a byte stream into frames — pushed to it in chunks, or pulled (the socket
 * reads where readTarget() says, see PullReader) — and throws FrameError on anything malformed:
 * wrong magic, header checksum, unknown type, oversized length, sequence gap, payload checksum.
 * The connection is then dropped by its owner: a stream cannot be resynchronised.
 */
import { crc32 } from 'node:zlib';
import { HASH_STRIPE, hashPayloadJs, newHashLanes, resetHashLanes, type TcpDataPath } from './dataPath.ts';
import {
  EMPTY_DATA_CHECK,
  FrameError,
  frameTypeName,
  HEADER_BYTES,
  isDataType,
  isFrameType,
  MAGIC,
  type Frame,
  type FrameHeader,
} from './frame.ts';

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
    if (!isFrameType(h.type) || (this.allowedTypes && !this.allowedTypes.has(h.type))) {
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
