/**
 * The report's charts of evaluations, the learning rate and stalls: a fragment of the browser script
 * (clientScript.ts), run inside its function with its helpers (`make`, `canvasIn`, `has`, `runLegend`,
 * `fmtPct`, `tickPct`) in scope. Each draws only when its section is on the page.
 */
export const EVAL_CHARTS = String.raw`
  // ---- validation: accuracy (left axis) and loss (right axis) after epochs; a star at the best model's evaluation
  if (has('validation')) {
    /** percentages with a decimal when the ticks are closer than a point apart */
    var finePct = function (v, i, ticks) {
      var step = ticks.length > 1 ? Math.abs(ticks[1].value - ticks[0].value) : 1;
      return (100 * v).toFixed(step < 0.01 ? 1 : 0) + '%';
    };
    var vsets = [];
    data.runs.forEach(function (run, r) {
      var v = run.series.validation;
      if (v.length === 0) return;
      var best = run.summary.best && run.summary.best.metric.indexOf('val') === 0 ? run.summary.best : null;
      vsets.push({ label: run.label, run: r, borderColor: run.color, backgroundColor: run.color, borderWidth: 2, yAxisID: 'y',
        pointRadius: v.map(function (e) { return best && e.epoch === best.epoch ? 9 : 3; }),
        pointStyle: v.map(function (e) { return best && e.epoch === best.epoch ? 'star' : 'circle'; }),
        data: v.filter(function (e) { return isFinite(e.accuracy); }).map(function (e) { return { x: e.step, y: e.accuracy }; }) });
      vsets.push({ label: run.label + ' (loss)', run: r, secondary: true, borderColor: run.color, backgroundColor: run.color, borderWidth: 1.5,
        borderDash: [5, 4], pointRadius: 2, yAxisID: 'y1',
        data: v.filter(function (e) { return isFinite(e.loss); }).map(function (e) { return { x: e.step, y: e.loss }; }) });
    });
    make('validation', canvasIn('validation'), {
      type: 'line', data: { datasets: vsets },
      options: {
        parsing: false, interaction: { mode: 'nearest', intersect: false },
        scales: {
          x: { type: 'linear', title: { display: true, text: 'step' } },
          y: { position: 'left', title: { display: true, text: 'validation accuracy' }, ticks: { callback: finePct } },
          y1: { position: 'right', title: { display: true, text: 'validation loss' }, grid: { drawOnChartArea: false } }
        },
        plugins: { legend: runLegend, resumeMarks: { axis: 'step' }, tooltip: { callbacks: { label: function (c) {
          return c.dataset.label + ': ' + (c.dataset.yAxisID === 'y' ? fmtPct(c.parsed.y, 2) : c.parsed.y.toFixed(4));
        } } } }
      }
    });
  }

  // ---- learning rate per step
  if (has('lr')) {
    make('lr', canvasIn('lr'), {
      type: 'line',
      data: { datasets: data.runs.filter(function (run) { return run.series.lr.step.length > 0; }).map(function (run) {
        var s = run.series.lr;
        return { label: run.label, borderColor: run.color, backgroundColor: run.color, borderWidth: 1.5, pointRadius: 0,
          data: s.step.map(function (x, i) { return { x: x, y: s.lr[i] }; }) };
      }) },
      options: {
        parsing: false, interaction: { mode: 'nearest', intersect: false },
        scales: { x: { type: 'linear', title: { display: true, text: 'step' } },
                  y: { beginAtZero: true, title: { display: true, text: 'learning rate' }, ticks: { callback: function (v) { return Number(v).toPrecision(2); } } } },
        plugins: { resumeMarks: { axis: 'step' }, tooltip: { callbacks: { label: function (c) { return c.dataset.label + ': ' + c.parsed.y.toPrecision(4); } } } }
      }
    });
  }

  // ---- stalls: when, and how long the device had waited
  if (has('stalls')) {
    make('stalls', canvasIn('stalls'), {
      type: 'scatter',
      data: { datasets: data.runs.filter(function (run) { return run.series.stalls.length > 0; }).map(function (run) {
        return { label: run.label, borderColor: run.color, backgroundColor: run.color, pointRadius: 5, stalls: run.series.stalls,
          data: run.series.stalls.map(function (s) { return { x: s.time, y: s.seconds }; }) };
      }) },
      options: {
        scales: { x: { type: 'linear', title: { display: true, text: 'wall time (s)' } },
                  y: { beginAtZero: true, title: { display: true, text: 'seconds waited' } } },
        plugins: { resumeMarks: { axis: 'time' }, tooltip: { callbacks: { label: function (c) {
          var s = c.dataset.stalls[c.dataIndex];
          return c.dataset.label + ': device ' + s.rank + ' waited ' + s.seconds.toFixed(1) + ' s in ' + s.waitingIn +
            (s.missing.length ? ' for device ' + s.missing.join(', ') : '');
        } } } }
      }
    });
  }
`;
