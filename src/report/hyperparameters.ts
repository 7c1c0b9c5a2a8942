/**
 * The report's hyperparameter tables: those that differ between the runs (one column per run), and
 * every one in a collapsed table; a run without config.yaml shows '—'.
 */
import { differingSettings, mergedKeys, type RunSettings } from './settings.ts';
import { esc } from './escape.ts';

interface Column {
  label: string;
  color: string;
  settings: RunSettings | null;
}

function table(keys: readonly string[], columns: readonly Column[], differing: ReadonlySet<string>): string {
  const head = `<tr><th>hyperparameter</th>${columns.map((c) => `<th><span class="swatch" style="background:${c.color}"></span>${esc(c.label)}</th>`).join('')}</tr>`;
  const rows = keys
    .map(
      (k) =>
        `<tr${differing.has(k) ? ' class="differs"' : ''}><td><code>${esc(k)}</code></td>${columns
          .map((c) => `<td>${esc(c.settings ? (c.settings.hyperparameters.get(k) ?? '—') : '—')}</td>`)
          .join('')}</tr>`,
    )
    .join('\n');
  return `<div class="wide-table"><table class="hyper"><thead>${head}</thead><tbody>\n${rows}\n</tbody></table></div>`;
}

/** The hyperparameters section ('' when no run has a config.yaml). */
export function hyperparameterSection(columns: readonly Column[]): string {
  const known = columns.filter((c) => c.settings !== null);
  if (known.length === 0) return '';
  const all = mergedKeys(known.map((c) => c.settings!));
  const differing = differingSettings(columns.map((c) => c.settings));
  const marked = new Set(differing);
  const missing = columns.filter((c) => c.settings === null).map((c) => c.label);
  const note = missing.length ? ` (${missing.map(esc).join(', ')}: no config.yaml in the run directory)` : '';
  let head: string;
  if (columns.length < 2) head = '';
  else if (differing.length === 0)
    head = `<p class="note">The runs share all ${all.length} hyperparameters${note}.</p>`;
  else
    head = `<p class="note">What differs between the runs, from each run's <code>config.yaml</code>${note}:</p>\n${table(differing, columns, marked)}`;
  const title = columns.length < 2 ? 'Hyperparameters' : 'Hyperparameters that differ';
  return `<section class="hyperparameters" id="hyperparameters">
<h2>${title}</h2>
${head}
<details><summary>All ${all.length} hyperparameters (<code>config.yaml</code>, every default filled in)</summary>
${table(all, columns, marked)}
</details>
</section>`;
}
