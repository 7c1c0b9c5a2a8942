/**
 * A feature worker thread (started by featureWorkers.ts): computes the features of the utterances it
 * is sent, with one extractor for the option set in its workerData, and sends each back, or the
 * error message computing it on the main thread would give.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { featuresOfFile, type FeatureJob } from './featureJob.ts';
import type { FeatureOptions } from './featureOptions.ts';
import { FeatureExtractor } from './features.ts';

/** A batch of utterances, each with its index in the caller's list. */
export interface FeatureRequest {
  jobs: (FeatureJob & { index: number })[];
}

/** One utterance's features, or why they could not be computed. */
export type FeatureReply = { index: number; data: Float32Array } | { index: number; error: string };

const port = parentPort;
if (!port) throw new Error('featureWorker.ts runs as a worker thread (featureWorkers.ts starts it)');
const extractor = new FeatureExtractor((workerData as { options: FeatureOptions }).options);

port.on('message', (request: FeatureRequest) => {
  const replies: FeatureReply[] = [];
  for (const job of request.jobs) {
    try {
      replies.push({ index: job.index, data: featuresOfFile(job, extractor) });
    } catch (e) {
      replies.push({ index: job.index, error: (e as Error).message });
    }
  }
  // copied, not transferred: a transfer detaches an ArrayBuffer, after which V8 checks every typed
  // array access in this thread for detachment (about a quarter slower here); the copy is a few kB
  port.postMessage(replies);
});
