/**
 * `paratrain transcribe [CONFIG] --checkpoint FILE a.wav b.wav …`: one line per file on stdout, the
 * file and its transcript separated by a tab (greedy decoding, or prefix beam search with --beam N).
 * Without CONFIG the config stored in the checkpoint is used, as eval and predict do.
 */
import { loadConfig } from '../config/index.ts';
import { transcribe } from '../runtime/infer/transcribe.ts';

export interface TranscribeFlags {
  checkpoint: string;
  beam?: number;
  backend?: string;
}

/** `transcribe [CONFIG] WAV…`: a first argument ending in .yaml/.yml is the config. */
export function splitTranscribeArgs(args: readonly string[]): { config?: string; wavs: string[] } {
  const [first, ...rest] = args;
  return first !== undefined && /\.ya?ml$/i.test(first) ? { config: first, wavs: rest } : { wavs: [...args] };
}

export async function runTranscribe(
  configPath: string | undefined,
  files: string[],
  flags: TranscribeFlags,
): Promise<void> {
  if (files.length === 0)
    throw new Error(
      'transcribe: no WAV files; give the .wav files to transcribe after the options (a first CONFIG.yaml is optional)',
    );
  const config = configPath === undefined ? undefined : loadConfig(configPath);
  const transcripts = await transcribe(config, flags.checkpoint, files, { beam: flags.beam, backend: flags.backend });
  process.stdout.write(transcripts.map((t) => `${t.file}\t${t.text}\n`).join(''));
}
