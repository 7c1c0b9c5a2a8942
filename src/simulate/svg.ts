/**
 * A simulation chart as a standalone SVG file (`paratrain simulate --svg DIR`): the same ChartSpec
 * the HTML report draws with Chart.js, drawn here as lines and markers on log or linear axes, so a
 * figure can sit in a Markdown page (docs/img/simulator/). No script, no fonts beyond the viewer's
 * sans-serif.
 */
import type { ChartSpec } from './charts.ts';

const W = 720,
  H = 400,
  LEFT = 70,
  RIGHT = 170,
  TOP = 44,
  BOTTOM = 52;

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** A short number: 1.5k, 2M, 0.25; percentages as 40%. */
function label(v: number, percent = false): string {
  if (percent) return `${Math.round(100 * v)}%`;
  const a = Math.abs(v);
  const short = (x: number, unit: string) => `${+x.toPrecision(3)}${unit}`;
  if (a >= 1e12) return short(v / 1e12, 'T');
  if (a >= 1e9) return short(v / 1e9, 'G');
  if (a >= 1e6) return short(v / 1e6, 'M');
  if (a >= 1e3) return short(v / 1e3, 'k');
  return short(v, '');
}

/** An axis: the value → pixel map and the tick values to label. */
function axis(
  values: number[],
  log: boolean,
  from: number,
  to: number,
  exact?: number[],
): { at: (v: number) => number; ticks: number[] } {
  let lo = Math.min(...values),
    hi = Math.max(...values);
  if (!(hi > lo)) {
    lo = log ? lo / 2 : lo - 1;
    hi = log ? hi * 2 : hi + 1;
  }
  if (log) {
    const a = Math.log10(lo),
      b = Math.log10(hi),
      pad = (b - a) * 0.04;
    const at = (v: number) => from + ((Math.log10(v) - (a - pad)) / (b - a + 2 * pad)) * (to - from);
    let ticks = exact ?? [];
    if (!exact) {
      for (let e = Math.floor(a); e <= Math.ceil(b); e++)
        for (const m of [1, 2, 5]) {
          const t = m * 10 ** e;
          if (t >= lo * 0.999 && t <= hi * 1.001) ticks.push(t);
        }
      if (ticks.length < 2) ticks = [lo, hi];
    }
    return { at, ticks };
  }
  if (!exact) {
    lo = Math.min(lo, 0);
  }
  const span = hi - lo,
    pad = span * 0.04;
  const at = (v: number) => from + ((v - (lo - pad)) / (span + 2 * pad)) * (to - from);
  if (exact) return { at, ticks: exact };
  const step = 10 ** Math.floor(Math.log10(span / 5));
  const nice = [1, 2, 5, 10].map((m) => m * step).find((s) => span / s <= 8) ?? step * 10;
  const ticks: number[] = [];
  for (let t = Math.ceil(lo / nice) * nice; t <= hi + 1e-12; t += nice) ticks.push(+t.toPrecision(12));
  return { at, ticks };
}

/** The chart as an SVG document. */
export function chartSvg(c: ChartSpec): string {
  const pts = c.series
    .flatMap((s) => s.points)
    .filter((p) => Number.isFinite(p[0]) && Number.isFinite(p[1]) && (!c.y.log || p[1] > 0));
  const xsAll = [...new Set(pts.map((p) => p[0]))].sort((a, b) => a - b);
  const x = axis(
    xsAll.length ? xsAll : [1, 2],
    c.x.log,
    LEFT,
    W - RIGHT,
    xsAll.length && xsAll.length <= 12 ? xsAll : undefined,
  );
  const y = axis(pts.length ? pts.map((p) => p[1]) : [0, 1], c.y.log, H - BOTTOM, TOP);
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
  );
  out.push(`<title>${esc(c.title)}</title><desc>${esc(c.note)}</desc>`);
  out.push(`<rect width="${W}" height="${H}" fill="#fff"/>`);
  out.push(`<text x="${LEFT}" y="20" font-size="14" font-weight="bold">${esc(c.title)}</text>`);
  for (const t of y.ticks) {
    const py = y.at(t).toFixed(1);
    out.push(`<line x1="${LEFT}" x2="${W - RIGHT}" y1="${py}" y2="${py}" stroke="#e5e5e5"/>`);
    out.push(
      `<text x="${LEFT - 6}" y="${py}" text-anchor="end" dominant-baseline="middle" fill="#444">${label(t, c.y.percent)}</text>`,
    );
  }
  for (const t of x.ticks) {
    const px = x.at(t).toFixed(1);
    out.push(`<line x1="${px}" x2="${px}" y1="${TOP}" y2="${H - BOTTOM}" stroke="#f0f0f0"/>`);
    out.push(
      `<text x="${px}" y="${H - BOTTOM + 16}" text-anchor="middle" fill="#444">${c.x.label === 'devices' ? String(t) : label(t)}</text>`,
    );
  }
  out.push(
    `<rect x="${LEFT}" y="${TOP}" width="${W - LEFT - RIGHT}" height="${H - TOP - BOTTOM}" fill="none" stroke="#888"/>`,
  );
  out.push(`<text x="${(LEFT + W - RIGHT) / 2}" y="${H - 12}" text-anchor="middle">${esc(c.x.label)}</text>`);
  out.push(
    `<text transform="translate(16 ${(TOP + H - BOTTOM) / 2}) rotate(-90)" text-anchor="middle">${esc(c.y.label)}</text>`,
  );
  // a ratio to hybrid: the line where the two are equal
  if (c.id.includes('-vs-hybrid-') && !c.y.log) {
    const py = y.at(1).toFixed(1);
    out.push(`<line x1="${LEFT}" x2="${W - RIGHT}" y1="${py}" y2="${py}" stroke="#555" stroke-dasharray="2 3"/>`);
  }
  c.series.forEach((s, i) => {
    const ok = s.points.filter((p) => Number.isFinite(p[0]) && Number.isFinite(p[1]) && (!c.y.log || p[1] > 0));
    const path = ok.map((p) => `${x.at(p[0]).toFixed(1)},${y.at(p[1]).toFixed(1)}`).join(' ');
    const dash = s.dashed ? ' stroke-dasharray="6 4"' : '';
    if (ok.length > 1) out.push(`<polyline points="${path}" fill="none" stroke="${s.color}" stroke-width="2"${dash}/>`);
    if (!s.dashed)
      for (const p of ok)
        out.push(`<circle cx="${x.at(p[0]).toFixed(1)}" cy="${y.at(p[1]).toFixed(1)}" r="2.5" fill="${s.color}"/>`);
    const ly = TOP + 8 + i * 16;
    out.push(
      `<line x1="${W - RIGHT + 12}" x2="${W - RIGHT + 32}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="2"${dash}/>`,
    );
    out.push(`<text x="${W - RIGHT + 38}" y="${ly}" dominant-baseline="middle">${esc(s.label)}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
