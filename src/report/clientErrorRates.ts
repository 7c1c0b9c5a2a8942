/**
 * The report's chart of a speech model's error rates (runs whose evaluations carry testCER/testWER,
 * loss ctc): a fragment of the browser script (clientScript.ts), run inside its function with its
 * helpers in scope. The section is on the page only when some run has error rates (html.ts).
 */

/** The section's id (`<section id="chart-error-rates">`), present only for speech runs. */
export const ERROR_RATE_CHART = 'error-rates';

export const ERROR_RATE_SCRIPT = String.raw`
  // ---- speech: character and word error rates of each evaluation (test solid, WER dashed; validation thinner)
  if (document.querySelector('#chart-error-rates .box')) {
    var esets = [];
    data.runs.forEach(function (run, r) {
      var lines = [['cer', ' CER', [], 2], ['wer', ' WER', [5, 4], 2], ['valCer', ' validation CER', [1, 3], 1.5], ['valWer', ' validation WER', [8, 3, 1, 3], 1.5]];
      lines.forEach(function (l, k) {
        var pts = run.series.evals.filter(function (e) { return typeof e[l[0]] === 'number' && isFinite(e[l[0]]); });
        if (pts.length === 0) return;
        esets.push({ label: run.label + l[1], run: r, secondary: k > 0, borderColor: run.color, backgroundColor: run.color,
          borderDash: l[2], borderWidth: l[3], pointRadius: 3,
          data: pts.map(function (e) { return { x: e.step, y: e[l[0]] }; }) });
      });
    });
    make('error-rates', canvasIn('error-rates'), {
      type: 'line', data: { datasets: esets },
      options: {
        parsing: false, interaction: { mode: 'nearest', intersect: false },
        scales: { x: { type: 'linear', title: { display: true, text: 'step' } },
                  y: { beginAtZero: true, title: { display: true, text: 'error rate (greedy decoding)' }, ticks: { callback: tickPct } } },
        plugins: { legend: runLegend, tooltip: { callbacks: { label: function (c) { return c.dataset.label + ': ' + fmtPct(c.parsed.y, 2); } } } }
      }
    });
  }
`;
