/**
 * Resumed runs in the browser: a fragment of the report's script (clientScript.ts), run inside its
 * function with `data` in scope, before any chart is made. A chart with
 * `plugins.resumeMarks: { axis: 'time' | 'step', only?: runIndex }` gets a dashed line, in the
 * run's colour, where each of its resumes begins; curves over wall time break there (the run was not
 * running between its segments: a gap, not a line across it).
 */
export const RESUME_MARKS_SCRIPT = `
  // ---- resumed runs: where each resume begins
  Chart.register({
    id: 'resumeMarks',
    afterDatasetsDraw: function (chart, args, opts) {
      if (!opts || !opts.axis) return;
      var x = chart.scales.x, area = chart.chartArea, ctx = chart.ctx;
      data.runs.forEach(function (run, r) {
        if (typeof opts.only === 'number' && opts.only !== r) return;
        run.series.resumes.forEach(function (m) {
          var px = x.getPixelForValue(m[opts.axis]);
          if (!(px >= area.left && px <= area.right)) return;
          ctx.save();
          ctx.strokeStyle = run.color;
          ctx.fillStyle = run.color;
          ctx.lineWidth = 1;
          ctx.setLineDash([4, 3]);
          ctx.beginPath();
          ctx.moveTo(px, area.top);
          ctx.lineTo(px, area.bottom);
          ctx.stroke();
          ctx.font = '11px sans-serif';
          ctx.fillText('resumed', px + 3, area.top + 11);
          ctx.restore();
        });
      });
    }
  });
  /** The segment (0, 1, …) of each point of a run's step series (its breaks). */
  function stepSegments(run) {
    var seg = [], k = 0, breaks = run.series.steps.breaks;
    for (var i = 0; i < run.series.steps.step.length; i++) {
      while (k < breaks.length && breaks[k] <= i) k++;
      seg.push(k);
    }
    return seg;
  }
  /** The segment of each of a run's events at times (seconds of training): the resumes before it. */
  function timeSegments(run, times) {
    return times.map(function (t) { return run.series.resumes.filter(function (m) { return m.time < t; }).length; });
  }
  /** Line styling that leaves out the pieces of a curve joining two segments (undefined: the dataset's own colour). */
  function breakBetween(seg) {
    return { borderColor: function (c) { return seg[c.p0DataIndex] !== seg[c.p1DataIndex] ? 'transparent' : undefined; } };
  }
`;
