/**
 * The kernel backend of a device thread. With peers in its process's shm world, the backend keeps
 * its wasm heap in the world's arena (the memory every device thread of the process maps), so the
 * replica's flat params, grads and state are arena buffers: registered, every collective on them
 * reduces in place with the SIMD kernel instead of copying through scratch (docs/backends.md).
 * PARATRAIN_SHM_HEAP=0 keeps each device's heap in its own memory (each up to wasm32's 4 GiB,
 * where the shared arena holds every device's heap within 4 GiB together). It also tells the webgpu
 * backend the device's slot on its host, which picks the device's GPU.
 */
import { getBackend, useSharedHeap, type Backend } from '../../kernels/index.ts';
import { useDeviceSlot } from '../../kernels/webgpu/deviceSlot.ts';
import type { ShmCommunicator } from '../../comm/shm/index.ts';
import { rendezvousFromEnv } from '../../comm/rendezvous.ts';

/**
 * This device's slot among its host's devices, LOCAL_RANK × devices per process + thread index
 * (the launcher's local rank: paratrain launch, mpirun, srun): a webgpu device opens GPU
 * `slot mod GPUs`, so the processes of a host spread over its GPUs (docs/backends.md).
 */
export function hostSlot(local: { rank: number; size: number }, env: NodeJS.ProcessEnv = process.env): number {
  let localRank = 0;
  try {
    localRank = rendezvousFromEnv(env).localRank;
  } catch {
    // `paratrain train` has already refused such an environment; a library caller's job counts as local rank 0
  }
  return localRank * local.size + local.rank;
}

/** `name`'s backend for this device thread, over `local`'s arena when the world has several ranks. */
export async function deviceBackend(name: string, local: ShmCommunicator): Promise<Backend> {
  if (local.size > 1 && process.env.PARATRAIN_SHM_HEAP !== '0') {
    const source = local.heapSource();
    useSharedHeap({
      ...source,
      reserve: (bytes) => {
        try {
          return source.reserve(bytes);
        } catch (err) {
          throw new Error(
            `${(err as Error).message}. The ${local.size} device threads of this process share one memory of at most 4 GiB; ` +
              'use fewer devices per process, a smaller batch, or PARATRAIN_SHM_HEAP=0 (each device its own memory; collectives then copy through scratch)',
          );
        }
      },
    });
  }
  useDeviceSlot(hostSlot(local));
  return getBackend(name);
}
