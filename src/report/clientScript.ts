/**
 * The script a report runs in the browser: reads the embedded data (#report-data) and draws every
 * chart with Chart.js. Plain ES2020, kept as a string so it is inlined as written.
 *
 * When done it sets `window.paratrainReport = { charts: [ids…], ready: true }` (tests wait for it).
 */
import { EVAL_CHARTS } from './clientEvalCharts.ts';
import { ERROR_RATE_SCRIPT } from './clientErrorRates.ts';
import { RESUME_MARKS_SCRIPT } from './clientResumeMarks.ts';

export const CLIENT_SCRIPT = String.raw`
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var KINDS = [
    { label: 'compute', color: '#4e79a7' },
    { label: 'communication', color: '#f28e2b' },
    { label: 'idle (waiting for peers)', color: '#e15759' }
  ];
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;
  Chart.defaults.font.family = 'system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif';
  Chart.defaults.font.size = 12;
  Chart.defaults.color = '#333';
  Chart.defaults.plugins.legend.labels.boxWidth = 14;
  var drawn = [];

  function alpha(hex, a) {
    var n = parseInt(hex.slice(1), 16);
    return 'rgba(' + (n >> 16) + ',' + ((n >> 8) & 255) + ',' + (n & 255) + ',' + a + ')';
  }
  function fmtBytes(n) {
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
    while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + ' ' + units[i];
  }
  function fmtPct(x, digits) { return (100 * x).toFixed(digits === undefined ? 1 : digits) + '%'; }
  function tickPct(v) { return Math.round(100 * v) + '%'; }
  /** A chart's section is on the page (the report leaves out those with nothing to draw). */
  function has(id) { return document.getElementById('chart-' + id) !== null; }
  function canvasIn(id) {
    var box = document.querySelector('#chart-' + id + ' .box');
    var c = document.createElement('canvas');
    box.appendChild(c);
    return c;
  }
  function make(id, canvas, config) {
    var chart = new Chart(canvas, config);
    drawn.push(id);
    return chart;
  }
  /** Debiased exponential moving average (as TensorBoard smooths), skipping gaps. */
  function smooth(values, w) {
    if (!(w > 0)) return values.slice();
    var out = [], last = 0, n = 0;
    for (var i = 0; i < values.length; i++) {
      var v = values[i];
      if (v === null || !isFinite(v)) { out.push(null); continue; }
      last = last * w + (1 - w) * v; n++;
      out.push(last / (1 - Math.pow(w, n)));
    }
    return out;
  }
  /** The legend lists runs; a click shows or hides every line of that run. */
  var runLegend = {
    labels: { filter: function (item, chart) { return !chart.datasets[item.datasetIndex].secondary; } },
    onClick: function (e, item, legend) {
      var chart = legend.chart, run = chart.data.datasets[item.datasetIndex].run;
      var hide = chart.isDatasetVisible(item.datasetIndex);
      chart.data.datasets.forEach(function (d, i) { if (d.run === run) chart.setDatasetVisibility(i, !hide); });
      chart.update();
    }
  };

${RESUME_MARKS_SCRIPT}
  // ---- loss and accuracy, against step and against wall time
  var smoothable = [];
  function curveChart(id, yKey, xKey, yTitle, isFraction) {
    var datasets = [];
    data.runs.forEach(function (run, r) {
      var xs = run.series.steps[xKey];
      var ys = run.series.steps[yKey];
      datasets.push({
        label: run.label, run: r, raw: ys, xs: xs, borderColor: run.color, backgroundColor: run.color,
        borderWidth: 1.5, pointRadius: 0, tension: 0, spanGaps: true, data: [],
        segment: xKey === 'time' ? breakBetween(stepSegments(run)) : undefined
      });
      var evalKey = yKey === 'loss' ? 'loss' : 'accuracy';
      var evals = run.series.evals.filter(function (e) { return isFinite(e[evalKey]) && isFinite(e[xKey]); });
      if (evals.length > 0) {
        datasets.push({
          label: run.label + ' (test)', run: r, secondary: true, borderColor: run.color, backgroundColor: '#fff',
          borderDash: [5, 4], borderWidth: 1.5, pointRadius: 4, pointBorderWidth: 2, pointStyle: 'rectRot',
          segment: xKey === 'time' ? breakBetween(timeSegments(run, evals.map(function (e) { return e.time; }))) : undefined,
          data: evals.map(function (e) { return { x: e[xKey], y: e[evalKey] }; })
        });
      }
    });
    var chart = make(id, canvasIn(id), {
      type: 'line',
      data: { datasets: datasets },
      options: {
        parsing: false, normalized: true, interaction: { mode: 'nearest', intersect: false },
        scales: {
          x: { type: 'linear', title: { display: true, text: xKey === 'step' ? 'step' : 'wall time (s)' } },
          y: { title: { display: true, text: yTitle }, ticks: isFraction ? { callback: tickPct } : {} }
        },
        plugins: {
          legend: runLegend,
          resumeMarks: { axis: xKey },
          tooltip: { callbacks: { label: function (c) {
            var v = c.parsed.y;
            return c.dataset.label + ': ' + (isFraction ? fmtPct(v) : v.toFixed(4));
          } } }
        }
      }
    });
    smoothable.push(chart);
    return chart;
  }
  function applySmoothing(w) {
    smoothable.forEach(function (chart) {
      chart.data.datasets.forEach(function (d) {
        if (!d.raw) return;
        var ys = smooth(d.raw, w);
        d.data = d.xs.map(function (x, i) { return { x: x, y: ys[i] }; });
      });
      chart.update('none');
    });
  }
  if (has('loss-step')) curveChart('loss-step', 'loss', 'step', 'loss');
  if (has('loss-time')) curveChart('loss-time', 'loss', 'time', 'loss');
  if (has('accuracy-step')) curveChart('accuracy-step', 'accuracy', 'step', 'accuracy', true);
  if (has('accuracy-time')) curveChart('accuracy-time', 'accuracy', 'time', 'accuracy', true);
  var slider = document.getElementById('smoothing');
  var sliderValue = document.getElementById('smoothing-value');
  function onSlide() { sliderValue.textContent = Number(slider.value).toFixed(2); applySmoothing(Number(slider.value)); }
  slider.addEventListener('input', onSlide);
  onSlide();

${EVAL_CHARTS}
  // ---- throughput
  if (has('throughput')) make('throughput', canvasIn('throughput'), {
    type: 'line',
    data: { datasets: data.runs.map(function (run, r) {
      var t = run.series.throughput;
      return { label: run.label, run: r, borderColor: run.color, backgroundColor: run.color, borderWidth: 1.5, pointRadius: 0,
        data: t.time.map(function (x, i) { return { x: x, y: t.samplesPerSecond[i] }; }) };
    }) },
    options: {
      parsing: false, interaction: { mode: 'nearest', intersect: false },
      scales: { x: { type: 'linear', title: { display: true, text: 'wall time (s)' } },
                y: { beginAtZero: true, title: { display: true, text: 'samples / s' } } },
      plugins: { legend: runLegend, resumeMarks: { axis: 'time' } }
    }
  });

  // ---- where each device's time went (shares)
  var rows = [], stragglerRow = [];
  data.runs.forEach(function (run) {
    run.summary.perDevice.forEach(function (d) {
      rows.push({ run: run, d: d });
    });
  });
  var shareBox = document.querySelector('#chart-device-share .box');
  shareBox.style.height = (70 + 26 * rows.length) + 'px';
  make('device-share', canvasIn('device-share'), {
    type: 'bar',
    data: {
      labels: rows.map(function (row) { return row.run.label + ' · device ' + row.d.rank + (row.d.straggler ? '  ⚠ straggler' : ''); }),
      datasets: KINDS.map(function (k, kind) {
        return { label: k.label, backgroundColor: k.color, data: rows.map(function (row) {
          var d = row.d, total = d.computeMs + d.commMs + d.idleMs;
          var part = [d.computeMs, d.commMs, d.idleMs][kind];
          return total > 0 ? part / total : 0;
        }), ms: rows.map(function (row) { return [row.d.computeMs, row.d.commMs, row.d.idleMs][kind]; }) };
      })
    },
    options: {
      indexAxis: 'y',
      scales: {
        x: { stacked: true, min: 0, max: 1, ticks: { callback: tickPct }, title: { display: true, text: 'share of the device\'s time' } },
        y: { stacked: true, ticks: { autoSkip: false, color: function (c) { return rows[c.index] && rows[c.index].d.straggler ? '#c0392b' : '#333'; } } }
      },
      plugins: { tooltip: { callbacks: { label: function (c) {
        return c.dataset.label + ': ' + fmtPct(c.parsed.x) + ' (' + (c.dataset.ms[c.dataIndex] / 1000).toFixed(2) + ' s)';
      } } } }
    }
  });

  // ---- per-device timeline, one chart per run
  var timelineBox = document.querySelector('#chart-timeline .box');
  data.runs.forEach(function (run, r) {
    var wrap = document.createElement('div');
    wrap.className = 'timeline';
    var title = document.createElement('h3');
    title.textContent = run.label;
    title.style.color = run.color;
    wrap.appendChild(title);
    var inner = document.createElement('div');
    inner.className = 'timeline-box';
    inner.style.height = (56 + 30 * run.series.timeline.length) + 'px';
    var canvas = document.createElement('canvas');
    inner.appendChild(canvas);
    wrap.appendChild(inner);
    timelineBox.appendChild(wrap);
    var straggler = {};
    run.summary.perDevice.forEach(function (d) { straggler[d.rank] = d.straggler; });
    var labels = run.series.timeline.map(function (t) { return 'device ' + t.rank + (straggler[t.rank] ? ' ⚠' : ''); });
    make('timeline', canvas, {
      type: 'bar',
      data: {
        labels: labels,
        datasets: KINDS.map(function (k, kind) {
          var points = [];
          run.series.timeline.forEach(function (t, row) {
            var s = t.segments;
            for (var i = 0; i < s.length; i += 3) if (s[i + 2] === kind) points.push({ y: labels[row], x: [s[i], s[i + 1]] });
          });
          return { label: k.label, backgroundColor: k.color, data: points, grouped: false, barPercentage: 0.8, categoryPercentage: 1,
            borderWidth: 0, borderSkipped: false };
        })
      },
      options: {
        indexAxis: 'y',
        scales: {
          x: { type: 'linear', min: 0, title: { display: true, text: 'wall time (s)' } },
          y: { ticks: { autoSkip: false, color: function (c) { return straggler[run.series.timeline[c.index] && run.series.timeline[c.index].rank] ? '#c0392b' : '#333'; } } }
        },
        plugins: {
          legend: { display: r === 0, position: 'top', align: 'end' },
          resumeMarks: { axis: 'time', only: r },
          tooltip: { callbacks: { label: function (c) {
            var v = c.raw.x;
            return c.dataset.label + ': ' + v[0].toFixed(2) + '–' + v[1].toFixed(2) + ' s (' + ((v[1] - v[0]) * 1000).toFixed(0) + ' ms)';
          } } }
        }
      }
    });
  });

  // ---- staleness of applied gradients (asynchronous runs)
  var staleRuns = data.runs.filter(function (run) { return run.series.staleness; });
  if (staleRuns.length > 0 && has('staleness')) {
    var bins = 0;
    staleRuns.forEach(function (run) { bins = Math.max(bins, run.series.staleness.counts.length); });
    var last = data.stalenessBins - 1;
    make('staleness', canvasIn('staleness'), {
      type: 'bar',
      data: {
        labels: Array.from({ length: bins }, function (_, i) { return i === last ? '≥' + i : String(i); }),
        datasets: staleRuns.map(function (run) {
          var counts = run.series.staleness.counts, total = counts.reduce(function (a, b) { return a + b; }, 0);
          return { label: run.label, backgroundColor: run.color, counts: counts,
            data: Array.from({ length: bins }, function (_, i) { return total > 0 ? (counts[i] || 0) / total : 0; }) };
        })
      },
      options: {
        scales: { x: { title: { display: true, text: 'staleness (server updates since the device fetched its weights)' } },
                  y: { beginAtZero: true, ticks: { callback: tickPct }, title: { display: true, text: 'share of gradients' } } },
        plugins: { tooltip: { callbacks: { label: function (c) {
          return c.dataset.label + ': ' + fmtPct(c.parsed.y) + ' (' + (c.dataset.counts[c.dataIndex] || 0) + ' gradients)';
        } } } }
      }
    });
  }

  // ---- totals per run: bytes communicated, peak memory (in the unit that suits the largest value)
  function perRunBars(id, bytes, title, note) {
    var max = 0;
    bytes.forEach(function (b) { if (b !== null && b > max) max = b; });
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], u = 0;
    while (max >= 1024 * 2 && u < units.length - 1) { max /= 1024; u++; }
    var scale = Math.pow(1024, u);
    make(id, canvasIn(id), {
      type: 'bar',
      data: { labels: data.runs.map(function (run) { return run.label; }),
        datasets: [{ data: bytes.map(function (b) { return b === null ? null : b / scale; }),
          backgroundColor: data.runs.map(function (run) { return run.color; }) }] },
      options: {
        scales: { y: { beginAtZero: true, suggestedMax: u === 0 ? 1024 : undefined,
          title: { display: true, text: title + ' (' + units[u] + ')' }, ticks: { precision: 0 } } },
        plugins: { legend: { display: false }, tooltip: { callbacks: {
          label: function (c) { return bytes[c.dataIndex] === null ? 'not recorded' : fmtBytes(bytes[c.dataIndex]); },
          afterLabel: note || function () { return ''; }
        } } }
      }
    });
  }
  if (has('bytes')) perRunBars('bytes', data.runs.map(function (run) { return run.summary.bytes; }), 'bytes communicated, all devices',
    function (c) { return data.runs[c.dataIndex].summary.perDevice.map(function (d) { return 'device ' + d.rank + ': ' + fmtBytes(d.bytes); }).join('\n'); });
  if (has('memory')) perRunBars('memory', data.runs.map(function (run) { return run.summary.maxRssBytes; }), 'peak resident memory');

${ERROR_RATE_SCRIPT}
  window.paratrainReport = { charts: drawn, ready: true };
})();
`;
