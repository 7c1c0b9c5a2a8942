/**
 * Where everything lives: word indices in the control block (an Int32Array over a
 * SharedArrayBuffer; every word a rank may block on is here, so an abort can wake them all) and
 * byte offsets in the arena (a shared WebAssembly.Memory holding staging areas, mailbox payloads
 * and buffers from `comm.alloc`). Both sides compute the same layout from the same parameters.
 */

export const MAGIC = 0x73686d31; // 'shm1'
export const LAYOUT_VERSION = 2;

export interface LayoutParams {
  size: number;
  /** user mutex slots in the control block */
  mutexes: number;
  /** bytes of staging per rank (two halves used alternately) */
  stagingBytes: number;
  /** payload bytes per ordered rank pair for send/recv */
  mailboxBytes: number;
}

/** words of one collective-call descriptor (see communicator.ts) */
export const DESC_WORDS = 8;
/** words of one mailbox header: STATE, TAG, TOTAL, CHUNK */
export const MAILBOX_WORDS = 4;
export const REASON_BYTES = 1024;
/**
 * bytes at the arena's start kept free: device threads that keep their kernels' heap in the arena
 * (`comm.heapSource()`) instantiate the kernel module over it, which writes its static data there
 */
export const KERNEL_STATIC_BYTES = 64 * 1024;
/** per-rank scratch in the arena for the SIMD kernel's pointer tables */
export const TABLE_BYTES = 4096;
/** per-rank scratch in the arena: copy-through slots for registered buffers outside the arena */
export const SCRATCH_BYTES = 256 * 1024;
export const ALIGN = 64;

export const alignUp = (n: number, a = ALIGN) => Math.ceil(n / a) * a;

export interface Layout extends LayoutParams {
  // control block (word indices)
  magic: number;
  sizeWord: number;
  abortFlag: number;
  abortRank: number;
  reasonLen: number;
  connected: number;
  /** arena bump pointer in units of ALIGN bytes */
  heapTop: number;
  barrier: number;
  allocLock: number;
  mutexBase: number;
  descBase: number;
  /** each rank's training step (the stall inspector reads peers') */
  stepBase: number;
  mailboxBase: number;
  /** byte offset of the abort reason text */
  reasonByte: number;
  controlBytes: number;
  // arena (byte offsets)
  tableBase: number;
  scratchBase: number;
  mailboxData: number;
  stagingBase: number;
  heapBase: number;
}

export function computeLayout(p: LayoutParams): Layout {
  const { size, mutexes } = p;
  let w = 8;
  const barrier = w;
  w += 2 + size;
  const allocLock = w;
  w += 1;
  const mutexBase = w;
  w += mutexes;
  const descBase = w;
  w += 2 * size * DESC_WORDS;
  const stepBase = w;
  w += size;
  const mailboxBase = w;
  w += size * size * MAILBOX_WORDS;
  const reasonByte = alignUp(w * 4, 16);
  const controlBytes = alignUp(reasonByte + REASON_BYTES, 64);
  const stagingBytes = alignUp(p.stagingBytes, 2 * ALIGN);
  const mailboxBytes = alignUp(p.mailboxBytes, ALIGN);
  const tableBase = KERNEL_STATIC_BYTES;
  const scratchBase = alignUp(tableBase + size * TABLE_BYTES);
  const mailboxData = alignUp(scratchBase + size * SCRATCH_BYTES);
  const stagingBase = alignUp(mailboxData + size * size * mailboxBytes);
  const heapBase = alignUp(stagingBase + size * stagingBytes);
  return {
    ...p,
    stagingBytes,
    mailboxBytes,
    magic: 0,
    sizeWord: 1,
    abortFlag: 2,
    abortRank: 3,
    reasonLen: 4,
    connected: 5,
    heapTop: 6,
    barrier,
    allocLock,
    mutexBase,
    descBase,
    stepBase,
    mailboxBase,
    reasonByte,
    controlBytes,
    tableBase,
    scratchBase,
    mailboxData,
    stagingBase,
    heapBase,
  };
}
