/**
 * Sample-rate conversion with SpeexDSP's resampler (https://github.com/xiph/speexdsp, BSD-3-Clause),
 * as compiled to WebAssembly with SIMD by @echogarden/speex-resampler-wasm.
 *
 * Method: polyphase windowed-sinc interpolation (a Kaiser-windowed sinc, tabulated once per rate
 * pair), low-passed at the lower of the two Nyquist frequencies, at quality RESAMPLE_QUALITY of 0–10.
 * Its pass band and stop band, measured with pure tones, are in docs/speech.md ("Reading WAV files")
 * and checked by test/speech/resample.test.ts. The filter's delay is removed (the output starts at
 * the input's first sample) and the input is flushed with zeros, so the output is the input's
 * duration: ⌈n · toRate / fromRate⌉ samples, as torchaudio.functional.resample gives.
 *
 * The module is loaded with top-level await (WebAssembly compiles asynchronously), so `resample`
 * itself is synchronous. One resampler state is kept per rate pair and reset for every call.
 */
import createSpeex, { type SpeexModule } from '@echogarden/speex-resampler-wasm/simd';

/** Speex's quality 0–10: filter length, pass band and stop band grow with it (docs/speech.md: what 6 gives). */
export const RESAMPLE_QUALITY = 6;

const speex: SpeexModule = await createSpeex();
/** [err, in_len, out_len] as C ints */
const ints = speex._malloc(12);
const states = new Map<string, number>();
/** one buffer for a call's input and output, grown as needed */
let buffer = { pointer: 0, floats: 0 };

function stateFor(fromRate: number, toRate: number): number {
  const key = `${fromRate}:${toRate}`;
  let state = states.get(key);
  if (state === undefined) {
    state = speex._speex_resampler_init(1, fromRate, toRate, RESAMPLE_QUALITY, ints);
    if (state === 0)
      throw new Error(`resample: the resampler refused ${fromRate} → ${toRate} Hz (error ${speex.HEAP32[ints >> 2]})`);
    states.set(key, state);
  }
  return state;
}

function floatsAt(floats: number): number {
  if (buffer.floats < floats) {
    if (buffer.pointer) speex._free(buffer.pointer);
    const size = Math.max(floats, 2 * buffer.floats);
    const pointer = speex._malloc(4 * size);
    if (!pointer) throw new Error(`resample: cannot allocate ${4 * size} bytes for the resampler`);
    buffer = { pointer, floats: size };
  }
  return buffer.pointer;
}

/** The number of samples `n` samples at `fromRate` become at `toRate`: ⌈n · toRate / fromRate⌉. */
export function resampledLength(n: number, fromRate: number, toRate: number): number {
  return Math.ceil((n * toRate) / fromRate);
}

/**
 * `samples` (mono, any scale) from `fromRate` to `toRate` Hz (whole numbers); the same array when the
 * rates are equal. The output has ⌈n · toRate / fromRate⌉ samples.
 */
export function resample(samples: Float32Array, fromRate: number, toRate: number): Float32Array {
  if (!Number.isInteger(fromRate) || !Number.isInteger(toRate) || fromRate <= 0 || toRate <= 0)
    throw new Error(`resample: sample rates must be positive whole numbers of Hz, got ${fromRate} → ${toRate} Hz`);
  if (fromRate === toRate || samples.length === 0) return samples;
  const state = stateFor(fromRate, toRate);
  speex._speex_resampler_reset_mem(state);
  speex._speex_resampler_skip_zeros(state);
  const n = samples.length;
  const outLength = resampledLength(n, fromRate, toRate);
  // the zeros after the input flush the filter's look-ahead, so the last outputs are computed too
  const inLength = n + speex._speex_resampler_get_input_latency(state) + 1;
  const input = floatsAt(inLength + outLength);
  const output = input + 4 * inLength;
  const heap = speex.HEAPF32;
  heap.set(samples, input >> 2);
  heap.fill(0, (input >> 2) + n, (input >> 2) + inLength);
  speex.HEAP32[(ints >> 2) + 1] = inLength;
  speex.HEAP32[(ints >> 2) + 2] = outLength;
  const status = speex._speex_resampler_process_float(state, 0, input, ints + 4, output, ints + 8);
  const written = speex.HEAP32[(ints >> 2) + 2]!;
  if (status !== 0 || written !== outLength)
    throw new Error(
      `resample: the resampler gave ${written} of ${outLength} samples (status ${status}) for ${n} samples at ${fromRate} → ${toRate} Hz`,
    );
  return speex.HEAPF32.slice(output >> 2, (output >> 2) + outLength);
}
