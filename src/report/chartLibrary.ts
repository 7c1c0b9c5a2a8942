/**
 * The chart library inlined into every report: Chart.js's minified UMD build, read from
 * node_modules at report time, so a report needs no network to be viewed.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

let cached: string | null = null;

/** Chart.js (UMD, defines `window.Chart`), cleaned so it can sit inside a `<script>` element. */
export function chartLibrarySource(): string {
  if (cached !== null) return cached;
  const require = createRequire(import.meta.url);
  let file: string;
  try {
    // the package's exports map names only its CommonJS and ES builds; the UMD build sits beside them
    file = join(dirname(require.resolve('chart.js')), 'chart.umd.min.js');
  } catch {
    throw new Error(`the chart library 'chart.js' is not installed; run npm install in the paratrain folder`);
  }
  let source: string;
  try {
    source = readFileSync(file, 'utf8');
  } catch {
    throw new Error(`the chart library file ${file} is missing; reinstall the 'chart.js' package`);
  }
  cached = sanitize(source, file);
  return cached;
}

/**
 * Drops the source-map comment (the map is not shipped) and the scheme of the project addresses in
 * the licence banners (`https://www.chartjs.org` → `www.chartjs.org`): the notices stay, and the
 * report holds no URL a browser or a reader could take for something to fetch.
 */
export function sanitize(source: string, file = 'chart library'): string {
  let s = source.replace(/^\/\/# sourceMappingURL=.*$/gm, '');
  s = s.replace(/\/\*![\s\S]*?\*\//g, (comment) => comment.replace(/https?:\/\//g, ''));
  if (/https?:\/\//i.test(s))
    throw new Error(`${file} contains a URL outside its licence comments; the report would not be self-contained`);
  if (/<\/script/i.test(s)) throw new Error(`${file} contains '</script'; it cannot be inlined into a report`);
  return s.trim();
}
