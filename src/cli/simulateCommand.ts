/**
 * `paratrain simulate CONFIG --devices 8,64,512 --link 10gbit:50us [--stragglers lognormal:0.2]
 * [--strategies …]`: the simulator's table on stdout, and with --report an HTML file of the
 * scaling curves (src/simulate, docs/simulator.md).
 */
import { runSimulation, type SimulateOutputFlags } from '../simulate/index.ts';

export async function runSimulate(
  config: string | undefined,
  flags: SimulateOutputFlags & { quiet?: boolean },
): Promise<void> {
  const log = flags.quiet ? undefined : (m: string) => process.stderr.write(`${m}\n`);
  const r = await runSimulation(config, { ...flags, log });
  process.stdout.write(r.text);
  if (r.reportPath) process.stdout.write(`report: ${r.reportPath}\n`);
  if (r.jsonPath) process.stdout.write(`json: ${r.jsonPath}\n`);
  if (r.svgPaths) process.stdout.write(`svg: ${r.svgPaths.length} charts in ${flags.svg}\n`);
}
