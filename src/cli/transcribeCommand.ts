/**
 * `paratrain transcribe CONFIG --checkpoint FILE a.wav b.wav …`: one line per file on stdout,
 * the file and its transcript separated by a tab (greedy decoding, or prefix beam search with --beam N).
 */
import { loadConfig, applyOverrides } from '../config/index.ts';
import { transcribe } from '../runtime/infer/transcribe.ts';

export interface TranscribeFlags {
  checkpoint: string;
  beam?: number;
  backend?: string;
}

export async function runTranscribe(configPath: string, files: string[], flags: TranscribeFlags): Promise<void> {
  const config = applyOverrides(loadConfig(configPath), { backend: flags.backend });
  const transcripts = await transcribe(config, flags.checkpoint, files, { beam: flags.beam });
  process.stdout.write(transcripts.map((t) => `${t.file}\t${t.text}\n`).join(''));
}
