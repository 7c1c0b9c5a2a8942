/**
 * The simulator's figures for docs/simulator.md: scaling curves from 1 to 1,024 devices
 * for mnist-small, alexnet-small and the speech example on three link types; where the trick
 * overtakes pure data parallelism as bandwidth falls; where bmuf and async overtake hybrid as
 * stragglers grow. Writes one SVG per figure into --out (default docs/img/simulator) and prints the
 * Markdown tables docs/simulator.md quotes.
 *
 *   node --import tsx scripts/simulator-figures.ts [--out docs/img/simulator] [--steps 200] [--remeasure]
 *
 * Predictions, not measurements: the layers are timed on this machine (cached; --remeasure times
 * them again), the rest is the cost model of docs/simulator.md.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSetup, type SimulateFlags } from '../src/simulate/setup.ts';
import { simulate, singleDeviceRate, type SimRow } from '../src/simulate/simulate.ts';
import { buildCharts, type ChartSpec } from '../src/simulate/charts.ts';
import { chartSvg } from '../src/simulate/svg.ts';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const LINKS = '100gbit:5us,10gbit:50us,1gbit:100us';
const ALL = 'hybrid,trick,bsp,bmuf:period=8,easgd,async,sync';

function option(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] ? args[i + 1]! : fallback;
}

interface Figure {
  name: string;
  config: string;
  flags: SimulateFlags;
  charts: (c: ChartSpec) => boolean;
  title?: (c: ChartSpec) => string;
  file: (c: ChartSpec) => string;
}

const scaling = (name: string, config: string, extra: SimulateFlags, what: string): Figure => ({
  name,
  config,
  flags: { devices: '1..1024', link: LINKS, strategies: ALL, ...extra },
  charts: (c) => c.id.endsWith('-throughput'),
  file: (c) => `${name}-${c.id.replace(/^link-/, '').replace(/-stragglers-none-throughput$/, '')}`,
  title: (c) => `${what}, samples/s — ${c.title.replace('Samples/s — link ', '').replace(', stragglers none', '')}`,
});

const FIGURES: Figure[] = [
  scaling('mnist', 'examples/mnist-small.yaml', {}, 'mnist-small, 64 per device'),
  scaling('alexnet', 'examples/alexnet-small.yaml', { batchSize: 64 }, 'alexnet-small, 64 per device'),
  // the trick cannot split this model (its dense layers sit on both sides of the LSTM): every row would be n/a
  scaling(
    'speech',
    'examples/deepspeech-small.yaml',
    { batchSize: 16, seqLen: 50, strategies: ALL.replace('trick,', '') },
    'deepspeech-small, 16 × 50 frames per device',
  ),
  {
    name: 'trick',
    config: 'examples/alexnet-small.yaml',
    flags: {
      batchSize: 64,
      devices: '2,4,8,16,64,256',
      strategies: 'hybrid,trick',
      link: '100gbit:5us,40gbit:10us,10gbit:50us,1gbit:100us,100mbit:2ms',
    },
    charts: (c) => c.id.startsWith('trick-vs-hybrid-by-link'),
    file: () => 'trick-by-bandwidth',
    title: () => 'alexnet-small: the trick / hybrid, samples/s, by link bandwidth',
  },
  {
    name: 'stragglers',
    config: 'examples/mnist-small.yaml',
    flags: {
      devices: '8,16,64,512',
      strategies: 'hybrid,async,bmuf:period=8',
      stragglers: 'none,lognormal:0.1,lognormal:0.2,lognormal:0.4,lognormal:0.6,lognormal:0.8,lognormal:1.2',
    },
    charts: (c) => c.id.includes('-vs-hybrid-by-stragglers'),
    file: (c) => `${c.id.split('-')[0]}-by-stragglers`,
    title: (c) => `mnist-small, 10 Gbit/s: ${c.title.split(' by ')[0]} by straggler σ`,
  },
];

const fmt = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

/** Markdown: samples/s of every strategy at a few device counts, one table per link. */
function scalingTable(rows: SimRow[], counts: number[]): string {
  const out: string[] = [];
  for (const link of [...new Set(rows.map((r) => r.link.name))]) {
    out.push(
      `\n${link}: samples/s (scaling efficiency)\n`,
      `| strategy | ${counts.join(' | ')} |`,
      `| --- | ${counts.map(() => '---:').join(' | ')} |`,
    );
    for (const s of [...new Set(rows.map((r) => r.strategy))]) {
      const cells = counts.map((g) => {
        const r = rows.find((q) => q.link.name === link && q.strategy === s && q.devices === g);
        return !r ? '' : r.feasible ? `${fmt(r.samplesPerSecond)} (${Math.round(100 * r.efficiency)}%)` : 'n/a';
      });
      out.push(`| ${s} | ${cells.join(' | ')} |`);
    }
  }
  return out.join('\n');
}

/** Markdown: one strategy's samples/s over hybrid's, by a scenario (link or stragglers) and device count. */
function ratioTable(rows: SimRow[], strategy: string, by: 'link' | 'stragglers'): string {
  const key = (r: SimRow) => (by === 'link' ? r.link.name : r.stragglers.name);
  const devices = [...new Set(rows.map((r) => r.devices))].sort((a, b) => a - b);
  const out = [
    `| ${by} | ${devices.map((d) => `${d} devices`).join(' | ')} |`,
    `| --- | ${devices.map(() => '---:').join(' | ')} |`,
  ];
  for (const k of [...new Set(rows.map(key))]) {
    const cells = devices.map((d) => {
      const r = rows.find((q) => q.strategy === strategy && q.devices === d && key(q) === k);
      const h = rows.find((q) => q.strategy === 'hybrid' && q.devices === d && key(q) === k);
      return r?.feasible && h?.feasible ? `${(r.samplesPerSecond / h.samplesPerSecond).toFixed(2)}×` : 'n/a';
    });
    out.push(`| ${k} | ${cells.join(' | ')} |`);
  }
  return out.join('\n');
}

export async function main(args: string[]): Promise<void> {
  const out = option(args, 'out', join(REPO, 'docs', 'img', 'simulator'));
  const steps = Number(option(args, 'steps', '200'));
  mkdirSync(out, { recursive: true });
  let remeasure = args.includes('--remeasure');
  for (const f of FIGURES) {
    const t0 = performance.now();
    const { setup, notes } = await buildSetup(join(REPO, f.config), {
      ...f.flags,
      steps,
      remeasure,
      log: (m) => process.stderr.write(`${m}\n`),
    });
    remeasure = false;
    const rows = simulate(setup);
    const charts = buildCharts(rows, singleDeviceRate(setup)).filter(f.charts);
    for (const c of charts)
      writeFileSync(join(out, `${f.file(c)}.svg`), chartSvg({ ...c, title: f.title ? f.title(c) : c.title }));
    process.stderr.write(
      `${f.name}: ${rows.length} predictions, ${charts.length} figures in ${((performance.now() - t0) / 1000).toFixed(1)} s (${notes.join('; ')})\n`,
    );
    console.log(`\n### ${f.name} (${f.config})\n`);
    if (f.name === 'trick') console.log(ratioTable(rows, 'trick', 'link'));
    else if (f.name === 'stragglers')
      for (const s of ['async', 'bmuf:period=8'])
        console.log(`\n${s} / hybrid, link 10gbit:50us\n\n${ratioTable(rows, s, 'stragglers')}`);
    else console.log(scalingTable(rows, [1, 8, 64, 1024]));
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main(process.argv.slice(2));
