/**
 * A dataset's fingerprint: what processes of one job compare at rendezvous to be sure they read
 * the same data (sample count, per-sample shape, classes or targets, class names, normalisation,
 * and a hash of the first samples and labels — enough to tell two sets apart, cheap for any size).
 */
import { createHash } from 'node:crypto';
import { labelsPerSample, sampleSize, taskOf, type Dataset } from './dataset.ts';
import { speechDatasetFingerprint } from '../speech/speechDataset.ts';

/** how many leading samples (images and labels) the fingerprint hashes */
export const FINGERPRINT_SAMPLES = 16;

const bytesOf = (a: Float32Array | Int32Array, n: number) => new Uint8Array(a.buffer, a.byteOffset, n * 4);
const short = (h: ReturnType<typeof createHash>) => `sha256:${h.digest('hex').slice(0, 12)}`;

/** Field → value, for messages: { samples: '4000', 'sample shape': '28×28×1', classes: '10', 'first samples': '9f3a…' }. */
export function datasetFingerprint(ds: Dataset): Record<string, string> {
  // utterances: their count, frames, feature size, alphabet and a hash of labels and leading features
  if (ds.speech) return speechDatasetFingerprint(ds.speech);
  const n = Math.min(FINGERPRINT_SAMPLES, ds.count);
  const hash = createHash('sha256')
    .update(bytesOf(ds.images, n * sampleSize(ds)))
    .update(bytesOf(ds.labels, n * labelsPerSample(ds)));
  if (ds.targets) hash.update(bytesOf(ds.targets, n * (ds.targetSize ?? 0)));
  const out: Record<string, string> = {
    samples: String(ds.count),
    'sample shape': ds.sampleShape.join('×'),
    classes: String(ds.classes),
    'first samples': short(hash),
  };
  // only what the data has, so Fashion-MNIST's fingerprint reads as before
  if (taskOf(ds) !== 'classification') Object.assign(out, { task: taskOf(ds), targets: String(ds.targetSize ?? 0) });
  if (ds.classNames) out['class names'] = short(createHash('sha256').update(JSON.stringify(ds.classNames)));
  if (ds.normalization) out.normalization = short(createHash('sha256').update(JSON.stringify(ds.normalization)));
  // a text: which corpus, and the vocabulary its ids stand for
  if (ds.text)
    Object.assign(out, {
      text: ds.text.fingerprint,
      vocabulary: short(createHash('sha256').update(JSON.stringify(ds.text.vocabulary))),
    });
  return out;
}
