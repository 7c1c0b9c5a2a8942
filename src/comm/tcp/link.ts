/**
 * One TCP connection speaking frames: a socket, its decoder, and this side's send sequence.
 *
 * Inbound frames are either queued for `next()` (the handshake reads them one at a time) or,
 * once `setHandler` is called, delivered to the handler (queued frames first). Any FrameError or
 * socket error ends the link: `onEnd(err)` runs exactly once, with `undefined` for a clean close.
 * Nothing here throws out of a socket event.
 */
import type { Server, Socket } from 'node:net';
import { PeerFailedError } from '../errors.ts';
import {
  encodeHeader,
  FrameError,
  FrameType,
  isDataType,
  payloadCheck,
  type Frame,
  type FrameHeader,
} from './frame.ts';
import { FrameDecoder } from './frameDecoder.ts';
import type { TcpDataPath } from './dataPath.ts';

const noop = () => {};
const EMPTY = new Uint8Array(0);

export function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The file descriptor of a socket or a listening server, where the platform has one (the native ring polls it). */
export function descriptorOf(s: Socket | Server | undefined): number | undefined {
  const fd = (s as unknown as { _handle?: { fd?: unknown } } | undefined)?._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : undefined;
}

/**
 * Reads of a socket we dial go where its Link's decoder says (`onread` with a buffer function):
 * data payloads straight into payload slots (or their landing place) — no 64 KiB read buffer per
 * read, no copy — and everything else (headers, bytes before a Link attaches) through a small
 * scratch buffer that is pushed to the decoder. Node asks for the next buffer right after each
 * read, so a buffer handed out may be used only later (after a pause, or after the native ring
 * read past the decoder): a payload target is therefore handed out only while the decoder is in a
 * payload, and the scratch buffer is always safe. Header reads stop at the header's end, so no
 * read completes more than one frame: the handshake raises a link's limits in a promise
 * continuation, which must run before the first data frame (possibly right behind the Welcome)
 * is parsed. Create it before `net.connect({ onread: reader.onread })`; bytes read before a Link
 * attaches are replayed to it.
 */
export class PullReader {
  private decoder: FrameDecoder | undefined;
  private onError: ((err: Error) => void) | undefined;
  private readonly early: Buffer[] = [];
  private readonly scratch = Buffer.alloc(4096); // never pooled: its ArrayBuffer identifies scratch reads
  readonly onread = {
    buffer: (): Uint8Array => {
      if (!this.decoder) return this.scratch;
      const target = this.decoder.readTarget();
      return this.decoder.inPayload ? target : this.scratch.subarray(0, target.length);
    },
    callback: (n: number, buf: Uint8Array): boolean => {
      try {
        if (buf.buffer === this.scratch.buffer) {
          if (this.decoder)
            this.decoder.push(this.scratch.subarray(0, n)); // buf is a view at its start
          else this.early.push(Buffer.from(this.scratch.subarray(0, n)));
        } else this.decoder?.didRead(n);
      } catch (err) {
        this.onError?.(err instanceof Error ? err : new FrameError(String(err)));
      }
      return true;
    },
  };

  attach(decoder: FrameDecoder, onError: (err: Error) => void): void {
    this.decoder = decoder;
    this.onError = onError;
    try {
      for (const b of this.early.splice(0)) decoder.push(b);
    } catch (err) {
      onError(err as Error);
    }
  }
}

export class Link {
  readonly socket: Socket;
  /** "host:port" of the other end, for messages */
  readonly remote: string;
  /** the rank at the other end, once authenticated; -1 before */
  peerRank = -1;
  /** payload bytes written / read (data frames and control frames alike) */
  bytesOut = 0;
  bytesIn = 0;

  /** the sequence number of the next frame this side sends */
  sendSeq = 0;
  private dataPath: TcpDataPath | undefined;
  private readonly decoder: FrameDecoder;
  private handler: ((frame: Frame) => void) | undefined;
  private readonly inbox: Frame[] = [];
  private waiter: { resolve: (f: Frame) => void; reject: (e: Error) => void } | undefined;
  private endError: Error | undefined;
  private ended = false;
  private endListeners: ((err: Error | undefined) => void)[] = [];

  /** `pull`: the socket was created with `pull.onread` (dialled sockets); else it is read by 'data' events. */
  constructor(socket: Socket, maxFrameBytes: number, allowedTypes?: ReadonlySet<number>, pull?: PullReader) {
    this.socket = socket;
    this.remote = hostPort(socket.remoteAddress ?? '?', socket.remotePort ?? 0);
    socket.setNoDelay(true);
    this.decoder = new FrameDecoder(maxFrameBytes, (f) => this.deliver(f), allowedTypes);
    if (pull) pull.attach(this.decoder, (err) => this.end(err, true));
    else {
      socket.on('data', (chunk: Buffer) => {
        try {
          this.decoder.push(chunk);
        } catch (err) {
          this.end(err instanceof Error ? err : new FrameError(String(err)), true);
        }
      });
    }
    socket.on('error', (err) => this.end(err, true));
    socket.on('close', () => this.end(undefined, false));
  }

  /** After authentication: larger frames, other types, data payloads in (and hashed by) `dataPath`. */
  raiseLimits(maxFrameBytes: number, allowedTypes?: ReadonlySet<number>, dataPath?: TcpDataPath): void {
    this.decoder.maxFrameBytes = maxFrameBytes;
    this.decoder.allowedTypes = allowedTypes;
    this.decoder.dataPath = dataPath;
    this.dataPath = dataPath;
  }

  /** Where inbound data frames may be read to instead of slots (FrameDecoder.landing). */
  setLanding(fn: ((h: FrameHeader) => Buffer | undefined) | undefined): void {
    this.decoder.landing = fn;
  }

  /**
   * Holds each inbound data frame for which `pred` is true at its header, before its payload, with
   * the socket's reading paused (see FrameDecoder.hold), until releaseHeld() or frames.takeHeld().
   */
  holdData(pred: (h: FrameHeader) => boolean): void {
    this.decoder.hold = (h) => {
      if (!pred(h)) return false;
      this.socket.pause();
      return true;
    };
  }

  /** Reads a held frame on, and the socket with it. */
  releaseHeld(): void {
    if (!this.decoder.heldHeader) return;
    this.decoder.release();
    this.socket.resume();
  }

  /** The socket's file descriptor, where the platform has one (the native ring uses it). */
  get fd(): number | undefined {
    return descriptorOf(this.socket);
  }

  /** Nothing of this side's writes is left in Node's or libuv's queues. */
  get flushed(): boolean {
    const queued = (this.socket as unknown as { _handle?: { writeQueueSize?: unknown } })._handle?.writeQueueSize;
    return this.socket.writableLength === 0 && queued === 0 && !this.ended;
  }

  /** The decoder, for the native ring's hand-over (between frames only). */
  get frames(): FrameDecoder {
    return this.decoder;
  }

  get isEnded(): boolean {
    return this.ended;
  }

  /** Runs once when the link ends; `err` undefined for an orderly close. Runs at once if ended. */
  onEnd(fn: (err: Error | undefined) => void): void {
    if (this.ended) fn(this.endError);
    else this.endListeners.push(fn);
  }

  /** The next inbound frame (handshake phase). Rejects when the link ends. */
  next(): Promise<Frame> {
    const f = this.inbox.shift();
    if (f) return Promise.resolve(f);
    if (this.ended) return Promise.reject(this.endError ?? new Error(`connection to ${this.remote} closed`));
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }

  setHandler(fn: (frame: Frame) => void): void {
    this.handler = fn;
    while (this.inbox.length && this.handler === fn) fn(this.inbox.shift()!);
  }

  private deliver(f: Frame): void {
    this.bytesIn += f.length;
    if (this.handler) this.handler(f);
    else if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w.resolve(f);
    } else this.inbox.push(f);
  }

  /**
   * Writes one frame; `check` is the payload's checksum when already known (forwarding). The payload is NOT copied: it must stay unchanged until the returned
   * promise resolves (the bytes have been handed to the kernel). The promise never causes an
   * unhandled rejection by itself: a failed write also ends the link.
   */
  send(
    type: number,
    tag: number,
    aux: number,
    payload?: Uint8Array,
    flags = 0,
    arg = 0,
    check?: number,
  ): Promise<void> {
    const len = payload ? payload.length : 0;
    const crc =
      check ??
      (len && this.dataPath && isDataType(type)
        ? this.dataPath.hashBytes(payload!)
        : payloadCheck(type, payload ?? EMPTY));
    const header = encodeHeader({ type, flags, arg, seq: this.sendSeq, tag, aux, length: len }, crc);
    this.sendSeq = (this.sendSeq + 1) >>> 0;
    this.bytesOut += len;
    const p = new Promise<void>((resolve, reject) => {
      if (this.ended || this.socket.destroyed) {
        reject(this.peerError(this.endError ?? new Error('connection closed')));
        return;
      }
      const done = (err?: Error | null) => (err ? reject(this.peerError(err)) : resolve());
      if (!len) {
        this.socket.write(header, done);
        return;
      }
      this.socket.cork();
      this.socket.write(header);
      this.socket.write(payload!, done);
      this.socket.uncork();
    });
    p.catch(noop);
    return p;
  }

  /** A failed write names the peer: PeerFailedError once authenticated. */
  private peerError(err: Error): Error {
    if (this.peerRank < 0) return err;
    return new PeerFailedError(
      this.peerRank,
      `connection to rank ${this.peerRank} (${this.remote}) failed: ${err.message}`,
    );
  }

  sendJson(type: number, body: unknown): Promise<void> {
    return this.send(type, 0, 0, Buffer.from(JSON.stringify(body), 'utf8'));
  }

  /** Sends one last control frame, then closes (whether or not the write succeeded). */
  sendJsonAndClose(type: number, body: unknown): void {
    const close = () => this.close();
    this.sendJson(type, body).then(close, close);
  }

  /** Sends a Refuse with `message`, then closes. */
  refuse(message: string): void {
    this.sendJsonAndClose(FrameType.Refuse, { message });
  }

  /** Orderly close: pending writes are flushed first. */
  close(): void {
    if (!this.socket.destroyed) this.socket.end();
    // a peer that never reads must not keep us alive
    const t = setTimeout(() => this.socket.destroy(), 2000);
    t.unref();
    this.socket.once('close', () => clearTimeout(t));
  }

  destroy(err?: Error): void {
    this.end(err, true);
  }

  private end(err: Error | undefined, destroy: boolean): void {
    if (destroy && !this.socket.destroyed) this.socket.destroy();
    if (this.ended) return;
    this.ended = true;
    this.endError = err;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w.reject(err ?? new Error(`connection to ${this.remote} closed`));
    }
    const ls = this.endListeners;
    this.endListeners = [];
    for (const fn of ls) {
      try {
        fn(err);
      } catch {
        // listeners must not throw; never let one crash the socket's event
      }
    }
  }
}
