/**
 * Reading WAV files into mono float samples: the parsing is wavefile's (RIFF/RIFX/RF64, PCM 8–32-bit,
 * IEEE float 32/64-bit, WAVE_FORMAT_EXTENSIBLE, A-law/µ-law, which it expands to 16-bit exactly as sox
 * does; IMA ADPCM is refused, wavefile's decoder disagrees with sox's);
 * what is added here is the scale (integers to [−1, 1)), the downmix (mean of the channels), reading
 * the common sample layouts straight from the data chunk's bytes (pcm.ts; wavefile's unpacker for the
 * rest), the resampling (resample.ts) and errors that name the file.
 */
import { readFileSync } from 'node:fs';
import wavefile from 'wavefile';
import { DIRECT_PCM_DEPTHS, monoFromPcm, pcmBytes } from './pcm.ts';
import { resample } from './resample.ts';

const { WaveFile } = wavefile;
type WaveFileT = InstanceType<typeof WaveFile>;

/** A decoded WAV file. */
export interface Audio {
  /** mono samples in [−1, 1] (the mean of the channels), at `sampleRate` */
  samples: Float32Array;
  sampleRate: number;
  /** the file's own rate and layout, for messages */
  sourceRate: number;
  channels: number;
  /** wavefile's code: '8', '16', '24', '32' (integer PCM), '32f', '64' (float), '8a' (A-law), '8m' (µ-law) */
  bitDepth: string;
}

/** The fields of wavefile's parsed header that are read here (its typings call them `object`). */
interface Parsed {
  fmt: {
    audioFormat: number;
    numChannels: number;
    sampleRate: number;
    bitsPerSample: number;
    blockAlign: number;
    subformat?: number[];
  };
  data: { chunkSize: number; samples: Uint8Array };
}

/** Data sizes from here up mean "until the end of the file" (what writers to a pipe put in the header). */
const STREAMED_SIZE = 0x7ffff000;

/** WAVE_FORMAT_EXTENSIBLE's sub-format code for IEEE float (the first field of its GUID). */
const SUBFORMAT_FLOAT = 3;

/**
 * Decodes a WAV file's bytes to mono float samples at `targetRate` Hz (the file's rate when absent).
 * `name` (the file, and the manifest line that named it) starts every error message.
 */
export function decodeWav(bytes: Uint8Array, name: string, targetRate?: number): Audio {
  let wav: WaveFileT;
  try {
    wav = new WaveFile(bytes);
  } catch (e) {
    throw new Error(
      `${name}: not a readable WAV file (${(e as Error).message.replace(/\.$/, '')}); expected RIFF/WAVE audio, e.g. made with \`sox INPUT -r 16000 -b 16 -c 1 OUT.wav\``,
    );
  }
  const { fmt, data } = wav as unknown as Parsed;
  const declared = data.chunkSize;
  // a size of 0x7ffff000 or more is the "unknown length" of a WAV streamed to a pipe (sox, espeak-ng, ffmpeg)
  if (data.samples.length < declared && declared < STREAMED_SIZE) {
    throw new Error(
      `${name}: the WAV file is truncated: its data chunk declares ${declared} bytes, ${data.samples.length} are present`,
    );
  }
  const bitDepth = wav.bitDepth;
  const channels = fmt.numChannels;
  const sourceRate = fmt.sampleRate;
  if (!(channels >= 1)) throw new Error(`${name}: the WAV header declares ${channels} channels`);
  if (!(sourceRate > 0)) throw new Error(`${name}: the WAV header declares a sample rate of ${sourceRate} Hz`);
  // wavefile's IMA ADPCM decoder disagrees with sox's on sox-made files (its block layout differs): refuse it
  if (bitDepth === '4')
    throw new Error(
      `${name}: IMA ADPCM WAV files are not supported; convert to 16-bit PCM, e.g. \`sox IN -e signed -b 16 OUT.wav\``,
    );
  try {
    if (bitDepth === '8a') wav.fromALaw();
    else if (bitDepth === '8m') wav.fromMuLaw();
  } catch (e) {
    throw new Error(`${name}: cannot expand the compressed (${bitDepth}) samples: ${(e as Error).message}`);
  }
  // wavefile reads a 32-bit float WAVE_FORMAT_EXTENSIBLE file as 32-bit integers: decode those as float
  const extensibleFloat =
    fmt.audioFormat === 0xfffe && fmt.subformat?.[0] === SUBFORMAT_FLOAT && fmt.bitsPerSample === 32;
  const depth = extensibleFloat ? '32f' : wav.bitDepth;
  const { offset, scale } = sampleScale(depth, name);
  const parsed = wav as unknown as Parsed & { container: string };
  let mono: Float32Array;
  try {
    mono =
      extensibleFloat || (DIRECT_PCM_DEPTHS.has(depth) && parsed.fmt.blockAlign === channels * pcmBytes(depth))
        ? monoFromPcm(parsed.data.samples, channels, depth, parsed.container === 'RIFX', offset, scale)
        : monoFromLanes(wav.getSamples(false, Float64Array) as unknown as Float64Array | Float64Array[], offset, scale);
  } catch (e) {
    throw new Error(`${name}: cannot read the ${depth}-bit samples: ${(e as Error).message}`);
  }
  if (mono.length === 0) throw new Error(`${name}: the WAV file holds no samples`);
  const rate = targetRate ?? sourceRate;
  return {
    samples: resample(mono, sourceRate, rate),
    sampleRate: rate,
    sourceRate,
    channels,
    bitDepth: extensibleFloat ? '32f' : bitDepth,
  };
}

/** The mean of wavefile's per-channel samples (the layouts monoFromPcm does not read), offset and scaled. */
function monoFromLanes(raw: Float64Array | Float64Array[], offset: number, scale: number): Float32Array {
  const lanes = Array.isArray(raw) ? raw : [raw];
  const n = lanes[0]!.length;
  const mono = new Float32Array(n);
  const k = scale / lanes.length;
  for (let i = 0; i < n; i++) {
    let sum = 0;
    for (const lane of lanes) sum += lane[i]! - offset;
    mono[i] = sum * k;
  }
  return mono;
}

/**
 * Integer PCM maps to [−1, 1) by 1/2^(c−1) for a container of c bits (samples of 12 or 20 bits are
 * left-justified in 16- or 24-bit containers); 8-bit WAV is unsigned (offset 128); float is as is.
 */
function sampleScale(bitDepth: string, name: string): { offset: number; scale: number } {
  if (bitDepth === '32f' || bitDepth === '64') return { offset: 0, scale: 1 };
  const bits = Number(bitDepth);
  if (!Number.isInteger(bits) || bits < 8 || bits > 32)
    throw new Error(
      `${name}: unsupported WAV sample format (${bitDepth}-bit); convert it to 16-bit PCM, e.g. \`sox IN -b 16 OUT.wav\``,
    );
  if (bits === 8) return { offset: 128, scale: 1 / 128 };
  const container = ((bits - 1) | 7) + 1;
  return { offset: 0, scale: 1 / 2 ** (container - 1) };
}

/**
 * Reads and decodes a WAV file (see `decodeWav`). `name` defaults to the path; a loader passes
 * `"wavs/a.wav (train.csv:12)"` so the message says which manifest line referenced the file.
 */
export function readWav(path: string, targetRate?: number, name = path): Audio {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new Error(`${name}: no such file`);
    if (code === 'EACCES') throw new Error(`${name}: permission denied`);
    if (code === 'EISDIR') throw new Error(`${name}: not a file`);
    throw e;
  }
  return decodeWav(bytes, name, targetRate);
}

/** A mono 16-bit PCM WAV file of samples in [−1, 1] (rounded, clipped) at `rate` Hz. */
export function encodeWav16(samples: ArrayLike<number>, rate: number): Uint8Array {
  const ints = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) ints[i] = Math.max(-32768, Math.min(32767, Math.round(samples[i]! * 32768)));
  const wav = new WaveFile();
  wav.fromScratch(1, rate, '16', ints);
  return wav.toBuffer();
}
