/**
 * Opening a report in headless Chromium (Debian's `chromium`, driven by playwright-core) and
 * checking what a person would see: no console errors, no network requests, every chart drawn.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export const CHROMIUM = process.env.PARATRAIN_CHROMIUM ?? '/usr/bin/chromium';

/** Why the browser test cannot run here, or null when it can. */
export function chromiumMissing(): string | null {
  return existsSync(CHROMIUM) ? null : `${CHROMIUM} not found (install Debian's chromium: apt-get install -y chromium)`;
}

export interface CanvasCheck {
  /** the chart section the canvas sits in (`chart-loss-step`, …) */
  section: string;
  width: number;
  height: number;
  /** pixels that are not transparent */
  inked: number;
  /** distinct colours among the inked pixels (axes alone give few; data gives many) */
  colours: number;
  /** data points over all datasets of its Chart.js chart */
  points: number;
}

export interface PageCheck {
  consoleErrors: string[];
  /** requests other than the report file itself */
  requests: string[];
  charts: string[];
  canvases: CanvasCheck[];
  sections: string[];
}

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Opens `htmlPath`, waits for the charts, inspects every canvas and saves a full-page screenshot. */
export async function inspectReport(
  htmlPath: string,
  screenshotPath: string,
  viewport = { width: 1400, height: 900 },
): Promise<PageCheck> {
  const { chromium } = await import('playwright-core');
  const userDataDir = mkdtempSync(join(tmpdir(), 'paratrain-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport,
    deviceScaleFactor: 1,
  });
  try {
    const page = await context.newPage();
    const consoleErrors: string[] = [];
    const requests: string[] = [];
    const url = pathToFileURL(htmlPath).href;
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
    page.on('pageerror', (e) => consoleErrors.push(`uncaught: ${e.message}`));
    page.on('request', (r) => {
      if (r.url() !== url) requests.push(r.url());
    });
    await page.goto(url, { waitUntil: 'load' });
    await page
      .waitForFunction(
        () => (window as unknown as { paratrainReport?: { ready: boolean } }).paratrainReport?.ready === true,
        null,
        { timeout: 20_000 },
      )
      .catch(() => {
        /* reported below: no charts */
      });
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    const result = await page.evaluate(() => {
      const w = window as unknown as {
        paratrainReport?: { charts: string[] };
        Chart?: { getChart(c: HTMLCanvasElement): { data: { datasets: { data: unknown[] }[] } } | undefined };
      };
      const canvases = [...document.querySelectorAll('canvas')].map((c) => {
        const ctx = c.getContext('2d')!;
        const { data } = ctx.getImageData(0, 0, c.width, c.height);
        let inked = 0;
        const colours = new Set<number>();
        for (let i = 0; i < data.length; i += 4) {
          if (data[i + 3]! > 0) {
            inked++;
            if (colours.size < 5000) colours.add((data[i]! << 16) | (data[i + 1]! << 8) | data[i + 2]!);
          }
        }
        const chart = w.Chart?.getChart(c);
        const points = chart ? chart.data.datasets.reduce((n, d) => n + d.data.length, 0) : 0;
        return {
          section: c.closest('section')?.id ?? '',
          width: c.width,
          height: c.height,
          inked,
          colours: colours.size,
          points,
        };
      });
      return {
        charts: w.paratrainReport?.charts ?? [],
        canvases,
        sections: [...document.querySelectorAll('section.chart')].map((s) => s.id),
      };
    });
    await page.screenshot({ path: screenshotPath, fullPage: true });
    return { consoleErrors, requests, ...result };
  } finally {
    await context.close();
    rmSync(userDataDir, { recursive: true, force: true });
  }
}
