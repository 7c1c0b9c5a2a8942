/**
 * Regenerates docs/compare-report.png, the README's picture of a comparison report: all six
 * strategies on 2 devices, 2 epochs on the shipped Fashion-MNIST subset, rendered in Debian's
 * headless Chromium (apt-get install chromium).
 *   node --import tsx scripts/readme-screenshot.ts
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCompare } from '../src/cli/compareCommand.ts';
import { chromiumMissing, inspectReport } from '../test/report/browser.ts';

const repo = fileURLToPath(new URL('..', import.meta.url));
const missing = chromiumMissing();
if (missing) throw new Error(missing);
const out = join(mkdtempSync(join(tmpdir(), 'paratrain-readme-')), 'compare');
try {
  const { report } = await runCompare(join(repo, 'examples/mnist-small.yaml'), {
    strategies: 'sync,async,hybrid,bsp,easgd,bmuf',
    devices: 2,
    epochs: 2,
    data: join(repo, 'data/fashion-mnist-subset'),
    out,
    quiet: true,
  });
  const page = await inspectReport(report, join(repo, 'docs/compare-report.png'));
  if (page.consoleErrors.length) throw new Error(`console errors: ${page.consoleErrors.join('; ')}`);
  console.log('wrote docs/compare-report.png');
} finally {
  rmSync(join(out, '..'), { recursive: true, force: true });
}
