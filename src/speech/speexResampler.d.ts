/**
 * Types for @echogarden/speex-resampler-wasm (SpeexDSP's resampler compiled to WebAssembly), which
 * ships none: its Emscripten module and the C functions of speex_resampler.h that resample.ts calls.
 * Pointers are byte offsets into the module's memory; HEAPF32/HEAP32 are views of it, replaced when
 * the memory grows (so read them again after every `_malloc`).
 */
declare module '@echogarden/speex-resampler-wasm/simd' {
  export interface SpeexModule {
    HEAPF32: Float32Array;
    HEAP32: Int32Array;
    _malloc(bytes: number): number;
    _free(pointer: number): void;
    /** speex_resampler_init(channels, in_rate, out_rate, quality 0–10, int *err): a state, 0 on error */
    _speex_resampler_init(channels: number, inRate: number, outRate: number, quality: number, err: number): number;
    _speex_resampler_destroy(state: number): void;
    /** forget the history, as a new state */
    _speex_resampler_reset_mem(state: number): number;
    /** drop the filter's delay from the start of the output */
    _speex_resampler_skip_zeros(state: number): number;
    /** input samples the filter looks ahead (half its length) */
    _speex_resampler_get_input_latency(state: number): number;
    /** (state, channel, in, *in_len, out, *out_len): in/out lengths are updated to what was used/written */
    _speex_resampler_process_float(
      state: number,
      channel: number,
      input: number,
      inLength: number,
      output: number,
      outLength: number,
    ): number;
    _speex_resampler_strerror(code: number): number;
  }
  const createModule: () => Promise<SpeexModule>;
  export default createModule;
}
