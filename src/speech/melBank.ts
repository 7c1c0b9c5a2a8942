/**
 * Kaldi's mel filterbank (mel-computations.cc; torchaudio.compliance.kaldi.get_mel_banks): mel(f) =
 * 1127·ln(1 + f/700); numFilters + 2 edges equally spaced in mel between lowHz and highHz; filter m
 * is a triangle in the MEL domain (not in Hz) over edges m, m+1, m+2, evaluated at the FFT bins
 * k·rate/fftSize for k < fftSize/2 (the Nyquist bin gets no weight). Stored sparsely: each filter's
 * first bin and its run of weights.
 */

export interface MelFilter {
  /** first FFT bin with a non-zero weight */
  start: number;
  weights: Float64Array;
}

export function melScale(hz: number): number {
  return 1127 * Math.log(1 + hz / 700);
}

/**
 * The filters for `fftSize`-point frames at `sampleRate`. `highHz` ≤ 0 counts down from the Nyquist
 * frequency. A filter that no FFT bin falls into is an error (too many filters for the window), as in Kaldi.
 */
export function melFilterbank(
  numFilters: number,
  fftSize: number,
  sampleRate: number,
  lowHz: number,
  highHz: number,
  field = 'features.melFilters',
): MelFilter[] {
  const nyquist = sampleRate / 2;
  const high = highHz <= 0 ? highHz + nyquist : highHz;
  const binWidth = sampleRate / fftSize;
  const melLow = melScale(lowHz);
  const melHigh = melScale(high);
  const delta = (melHigh - melLow) / (numFilters + 1);
  const numBins = fftSize / 2;
  const binMel = new Float64Array(numBins);
  for (let k = 0; k < numBins; k++) binMel[k] = melScale(binWidth * k);
  const filters: MelFilter[] = [];
  for (let m = 0; m < numFilters; m++) {
    const left = melLow + m * delta;
    const center = melLow + (m + 1) * delta;
    const right = melLow + (m + 2) * delta;
    let first = -1,
      last = -1;
    const w = new Float64Array(numBins);
    for (let k = 0; k < numBins; k++) {
      const up = (binMel[k]! - left) / (center - left);
      const down = (right - binMel[k]!) / (right - center);
      const v = Math.max(0, Math.min(up, down));
      if (v > 0) {
        if (first < 0) first = k;
        last = k;
      }
      w[k] = v;
    }
    if (first < 0) {
      throw new Error(
        `${field}: ${numFilters} mel filters between ${lowHz} and ${high} Hz are too many for a ${fftSize}-point FFT (filter ${m} covers no frequency bin); use fewer filters or a longer window`,
      );
    }
    filters.push({ start: first, weights: w.slice(first, last + 1) });
  }
  return filters;
}
