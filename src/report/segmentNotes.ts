/**
 * What the report says about a resumed run under *Runs*: its segments (how long each trained, which
 * steps, how it ended), the totals, and each resume (from which step and set, after how long a gap,
 * and whether it stretched a schedule that had already finished).
 */
import type { RunData } from './runData.ts';
import type { RunSummary } from './analyze.ts';
import type { ResumeInfo, RunSegment } from './segments.ts';
import { formatSeconds } from './table.ts';
import { esc } from './escape.ts';

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
const count = (n: number) => Math.round(n).toLocaleString('en-US');

/** An HTML fragment for the run's line under *Runs*: empty for a run started once. */
export function segmentNotes(run: RunData, summary: RunSummary): string {
  const segs = run.segments;
  if (segs.length < 2) return '';
  const totals =
    `${plural(segs.length, 'segment')}: ${formatSeconds(summary.wallSeconds)} of training ` +
    `(${segs.map((s) => formatSeconds(s.seconds)).join(' + ')}), ${formatSeconds(summary.elapsedSeconds)} elapsed ` +
    `from the first start to the last event, gaps included; ${count(summary.samples)} samples trained ` +
    `(the steps a resume redid included), ${count(summary.samplesPerSecond)} samples/s over the training time`;
  const items = segs.map((s, k) => `<li>${esc(describe(s, k === 0 ? null : segs[k - 1]!))}</li>`);
  return `<br>resumed, ${esc(totals)}:<ol class="segments">${items.join('')}</ol>`;
}

function describe(s: RunSegment, previous: RunSegment | null): string {
  const steps = Number.isFinite(s.firstStep) ? `steps ${s.firstStep}–${s.lastStep}` : 'no steps';
  const ended = s.ended === 'end' ? 'ended' : s.ended === 'stopped' ? 'stopped (a signal)' : 'killed (no end event)';
  const trained = `${formatSeconds(s.seconds)}, ${steps}, ${ended}`;
  if (!previous) return `started: ${trained}`;
  const gap = formatSeconds((s.start - previous.last) / 1000);
  if (!s.resume) return `started again after ${gap}: ${trained}`;
  return `${resumeLine(s.resume)}, ${gap} after the previous segment's last event: ${trained}`;
}

/** `resumed at step 10 (epoch 2) from SET`, with what changed: devices, epochs, a stretched schedule. */
function resumeLine(r: ResumeInfo): string {
  const parts = [`resumed at step ${r.step} (epoch ${r.epoch + 1})`];
  if (r.scheduleFinished && r.epochsAfter > r.epochsBefore)
    parts[0] +=
      ` after the run had finished its schedule of ${plural(r.epochsBefore, 'epoch')}: ` +
      `train.epochs ${r.epochsBefore} → ${r.epochsAfter} stretched it (a decaying learning rate follows the longer schedule: see the learning-rate chart)`;
  else if (r.epochsAfter !== r.epochsBefore && Number.isFinite(r.epochsAfter))
    parts.push(`train.epochs ${r.epochsBefore} → ${r.epochsAfter}`);
  if (r.devices !== r.fromDevices && Number.isFinite(r.devices))
    parts.push(`on ${plural(r.devices, 'device')} (saved on ${r.fromDevices})`);
  parts.push(`from ${r.checkpoint}`);
  return parts.join(', ');
}

/** The header's line naming the resumed runs (empty: none), and where a resume stretched a finished schedule. */
export function resumedNote(runs: readonly { label: string; run: RunData }[]): string {
  const resumed = runs.filter((r) => r.run.segments.length > 1);
  if (resumed.length === 0) return '';
  const named = resumed.map((r) => {
    const stretched = r.run.segments.flatMap((s) =>
      s.resume?.scheduleFinished && s.resume.epochsAfter > s.resume.epochsBefore
        ? [`train.epochs ${s.resume.epochsBefore} → ${s.resume.epochsAfter} after its schedule had finished`]
        : [],
    );
    return `${r.label} (${plural(r.run.segments.length, 'segment')}${stretched.map((x) => `; ${x}`).join('')})`;
  });
  return esc(
    ` Resumed: ${named.join(', ')}. Wall time is time spent training, the segments end to end; a dashed line marks each resume (details under Runs).`,
  );
}
