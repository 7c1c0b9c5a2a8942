/**
 * This thread's slot among the devices of its host: LOCAL_RANK × devices per process + thread
 * index, set by the device thread before it opens its backend. Unless PARATRAIN_WEBGPU_ADAPTER says
 * otherwise, a webgpu device opens GPU `slot mod GPUs` (adapterChoice.ts); a thread that never set
 * it (the main thread, a test) is slot 0.
 */
let slot = 0;

export function useDeviceSlot(value: number): void {
  if (!Number.isInteger(value) || value < 0) throw new RangeError(`a device slot is a whole number ≥ 0, not ${value}`);
  slot = value;
}

export function deviceSlot(): number {
  return slot;
}
