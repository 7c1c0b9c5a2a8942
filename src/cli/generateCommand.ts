/**
 * `paratrain generate [CONFIG] --checkpoint FILE --prompt TEXT`: a trained character-level language
 * model continues the prompt; stdout gets the prompt and each new character as it is drawn, then a
 * newline. Without CONFIG the config stored in the checkpoint is used, as eval and predict do.
 */
import { loadConfig } from '../config/index.ts';
import { loadTextGenerator } from '../runtime/infer/generate.ts';

export interface GenerateFlags {
  checkpoint: string;
  prompt: string;
  length: number;
  temperature: number;
  topK: number;
  seed: number;
  backend?: string;
}

export async function runGenerate(configPath: string | undefined, flags: GenerateFlags): Promise<void> {
  const config = configPath === undefined ? undefined : loadConfig(configPath);
  const generator = await loadTextGenerator(flags.checkpoint, config, flags.backend);
  // every check (prompt, options) before the first character is printed
  generator.encode(flags.prompt);
  process.stdout.write(flags.prompt);
  generator.generate(flags.prompt, {
    length: flags.length,
    temperature: flags.temperature,
    topK: flags.topK,
    seed: flags.seed,
    onText: (ch) => process.stdout.write(ch),
  });
  process.stdout.write('\n');
}
