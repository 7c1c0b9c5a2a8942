/**
 * `paratrain simulate`: how each strategy would scale past this machine — step time, samples/s,
 * scaling efficiency, bytes per step and device, idle share and async staleness for many devices
 * on α-β links with stragglers — from the model's compute measured here (or a run's) and a cost
 * model of paratrain's own collectives. docs/simulator.md describes the model and its limits.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { buildSetup, type SimulateFlags } from './setup.ts';
import { simulate, singleDeviceRate, type SimRow } from './simulate.ts';
import { formatSimulation } from './table.ts';
import { writeSimulationReport } from './html.ts';
import { buildCharts } from './charts.ts';
import { chartSvg } from './svg.ts';
import { formatByteRate, formatDuration, formatRate } from './units.ts';

export {
  simulate,
  singleDeviceRate,
  stalenessOf,
  placementOf,
  type SimRow,
  type SimulationSetup,
  type Staleness,
} from './simulate.ts';
export { buildSetup, parseShm, SIM_DEFAULTS, type SimulateFlags } from './setup.ts';
export { parseLink, parseLinks, parseDevices, parseRate, parseDuration, type Link } from './units.ts';
export { parseStragglers, parseStragglerList, StragglerSampler, type Stragglers } from './stragglers.ts';
export { readRunMeasurements, type RunMeasurements } from './fromRun.ts';
export * as costModel from './costModel.ts';
export { formatSimulation } from './table.ts';
export { renderSimulationHtml, writeSimulationReport } from './html.ts';

/** `paratrain simulate`'s flags, outputs included. */
export interface SimulateOutputFlags extends SimulateFlags {
  /** HTML report file */
  report?: string;
  /** the rows as JSON */
  json?: string;
  force?: boolean;
  title?: string;
  /** a directory for one SVG file per chart */
  svg?: string;
}

/** The rows, the terminal text, and the files written. */
export interface SimulationResult {
  rows: SimRow[];
  text: string;
  reportPath?: string;
  jsonPath?: string;
  /** the SVG files written (--svg) */
  svgPaths?: string[];
}

/** Runs a simulation from the command line's flags; writes the report/JSON when asked. */
export async function runSimulation(configPath: string | undefined, f: SimulateOutputFlags): Promise<SimulationResult> {
  const { setup, config, configPath: path, notes } = await buildSetup(configPath, f);
  const rows = simulate(setup);
  const oneDevice = singleDeviceRate(setup);
  const batch =
    setup.batch.scope === 'perDevice' ? `${setup.batch.size} per device` : `${setup.batch.size} per step (global)`;
  const header = [
    `paratrain simulate ${path}: ${config.model.layers.length} layers, ${setup.costs.paramFloats.toLocaleString('en-US')} parameters (flat), batch ${batch}`,
    ...notes,
    `network: ${setup.links.map((l) => `${l.name} (${formatRate(l.beta)}, ${formatDuration(l.alpha)})`).join('; ')}; ${setup.perHost} device(s) per host; ` +
      `shared memory ${formatByteRate(setup.shm.beta)} per process, ${formatDuration(setup.shm.alpha)}; TCP ring loop ${setup.hostRate ? formatByteRate(setup.hostRate) : 'unlimited'} per process; ` +
      `gradient buckets: ${setup.overlap === 'ideal' ? 'overlapping backward on every transport (ideal)' : 'as implemented (overlapping backward across hosts, with several devices per host the part that crosses the link; after it on one host)'}`,
    `one device: ${oneDevice.toFixed(0)} samples/s; ${setup.steps} steps simulated per device, seed ${setup.seed}`,
  ];
  const text = formatSimulation(rows, header);
  const result: SimulationResult = { rows, text };
  if (f.report) {
    result.reportPath = writeSimulationReport(
      f.report,
      rows,
      {
        title: f.title ?? `paratrain simulate: ${basename(path)}`,
        notes: header.slice(1),
        oneDevice,
      },
      f.force,
    );
  }
  if (f.svg) {
    mkdirSync(f.svg, { recursive: true });
    result.svgPaths = buildCharts(rows, oneDevice).map((c) => {
      const file = join(f.svg!, `${c.id}.svg`);
      writeFileSync(file, chartSvg(c));
      return file;
    });
  }
  if (f.json) {
    // each device's step only for small jobs: 1,024 numbers a row would drown the file
    const jsonRows = rows.map(({ deviceStepSeconds, ...r }) => ({
      ...r,
      link: r.link.name,
      stragglers: r.stragglers.name,
      ...(deviceStepSeconds && r.devices <= 16 ? { deviceStepSeconds } : {}),
    }));
    writeFileSync(f.json, JSON.stringify({ header, oneDevice, rows: jsonRows }, null, 1));
    result.jsonPath = f.json;
  }
  return result;
}
