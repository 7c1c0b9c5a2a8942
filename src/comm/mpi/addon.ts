/**
 * The optional MPI addon (native/mpi/paratrain_mpi.c, built by `npm run build:mpi` into
 * build/native/paratrain_mpi.node, or by a hand-run `node-gyp rebuild` in native/mpi/), found and
 * loaded by the platform loader (src/platform/addon.ts).
 *
 * The addon is loaded with RTLD_GLOBAL: some Open MPI builds dlopen components that expect
 * libmpi's symbols in the global namespace, and Node's default (RTLD_LOCAL) hides them. (Debian's
 * Open MPI 4.1 links its components against libmpi and works either way; the addon also promotes
 * libmpi to global itself before MPI_Init.)
 *
 * Loading never throws: a missing file, a missing libmpi.so, an ABI mismatch or PARATRAIN_MPI=0
 * give null, and `mpiUnavailableReason()` says which and how to fix it.
 */
import os from 'node:os';
import { addonPath, addonUnavailableReason, loadAddon, type AddonSpec } from '../../platform/addon.ts';

/** init()'s answer. `provided` is MPI's thread level (MPI_THREAD_FUNNELED = 1 or more is needed). */
export interface MpiInitInfo {
  rank: number;
  size: number;
  provided: number;
  /** MPI_Get_library_version, e.g. 'Open MPI v4.1.4, package: Debian OpenMPI, …' */
  library: string;
}

/**
 * The addon's exports (see native/mpi/paratrain_mpi.c). The i… calls return a request number,
 * completed with test() or wait(); every other call blocks the calling thread.
 */
export interface MpiAddon {
  /** MPI_Init_thread(FUNNELED) on the first call; the calling thread is the only one allowed to use MPI. */
  init(): MpiInitInfo;
  state(): 'uninitialized' | 'initialized' | 'finalized';
  /** Blocking MPI_Allreduce (Open MPI's tuned algorithm): the benchmarks' reference. op: 0 = sum, 1 = mean (sum / size) */
  allreduce(buf: Float32Array, op: 0 | 1): void;
  /** MPI_Iallreduce(MPI_IN_PLACE); a mean is divided on completion */
  iallreduce(buf: Float32Array, op: 0 | 1): number;
  /** once complete, ownedSlice(buf.length, size, rank) of buf holds the reduction */
  ireduceScatter(buf: Float32Array, op: 0 | 1): number;
  iallgather(buf: Float32Array): number;
  broadcast(buf: Float32Array, root: number): void;
  barrier(): void;
  /** Non-blocking point to point: returns a request number for test() or wait(). */
  isend(buf: Float32Array, dest: number, tag: number): number;
  irecv(buf: Float32Array, source: number, tag: number): number;
  /** MPI_Test: false while pending; then the number of floats received (receives) or true (sends, collectives). */
  test(request: number): boolean | number;
  /** MPI_Wait: blocks until the request completes, then answers as test() */
  wait(request: number): true | number;
  /** Prints the message and ends every process of the job (MPI_Abort); does not return. */
  abort(message: string, code: number): void;
  finalize(): void;
}

const HOW_TO_BUILD =
  'install Open MPI (apt-get install libopenmpi-dev openmpi-bin), then run `npm run build:mpi` (or `npm rebuild`)';

const SPEC: AddonSpec = {
  file: 'paratrain_mpi.node',
  sourceDir: 'native/mpi',
  disableEnv: 'PARATRAIN_MPI',
  requiredExports: ['iallreduce', 'wait'],
  buildCommand: 'npm run build:mpi',
  notBuiltReason: `the MPI addon build/native/paratrain_mpi.node is not built: ${HOW_TO_BUILD}`,
  loadFailureReason: (path, message) => `${path} does not load (${message}): ${HOW_TO_BUILD}`,
  dlopenFlags: os.constants.dlopen.RTLD_NOW | os.constants.dlopen.RTLD_GLOBAL,
};

/** Absolute path of the addon file that would be loaded, or null when none is built. */
export function mpiAddonPath(): string | null {
  return addonPath(SPEC);
}

/** The addon, or null when it is not built, does not load here, or PARATRAIN_MPI=0. Loaded once per thread. */
export function loadMpiAddon(): MpiAddon | null {
  return loadAddon<MpiAddon>(SPEC);
}

/** Why `loadMpiAddon()` returned null (undefined when it loaded or was not tried). */
export function mpiUnavailableReason(): string | undefined {
  return addonUnavailableReason(SPEC);
}
