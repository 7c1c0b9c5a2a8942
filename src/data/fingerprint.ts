/**
 * A dataset's fingerprint: what processes of one job compare at rendezvous to be sure they read
 * the same data (sample count, per-sample shape, classes, and a hash of the first samples and
 * labels — enough to tell two sets apart, cheap for any size).
 */
import { createHash } from 'node:crypto';
import { sampleSize, type Dataset } from './dataset.ts';

/** how many leading samples (images and labels) the fingerprint hashes */
export const FINGERPRINT_SAMPLES = 16;

/** Field → value, for messages: { samples: '4000', 'sample shape': '28×28×1', classes: '10', 'first samples': '9f3a…' }. */
export function datasetFingerprint(ds: Dataset): Record<string, string> {
  const n = Math.min(FINGERPRINT_SAMPLES, ds.count);
  const hash = createHash('sha256')
    .update(new Uint8Array(ds.images.buffer, ds.images.byteOffset, n * sampleSize(ds) * 4))
    .update(new Uint8Array(ds.labels.buffer, ds.labels.byteOffset, n * 4));
  return {
    samples: String(ds.count), 'sample shape': ds.sampleShape.join('×'), classes: String(ds.classes),
    'first samples': `sha256:${hash.digest('hex').slice(0, 12)}`,
  };
}
