/**
 * `paratrain eval`: a model checkpoint evaluated on the test set of its config (the config given,
 * or the one stored in the checkpoint; evalTestSet.ts reads it): loss and accuracy as training reports them, and for a
 * classifier the per-class precision, recall, F1 and confusion matrix, classes named from the
 * checkpoint's metadata when it names them.
 */
import { inferenceBackend } from './inferenceBackend.ts';
import { loadConfig } from '../../config/load.ts';
import { applyOverrides } from '../../config/overrides.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import { readCheckpoint } from '../checkpoint/checkpoint.ts';
import { loadModelCheckpoint } from '../checkpoint/modelCheckpoint.ts';
import { Replica } from '../device/replica.ts';
import { evalExtras } from '../eval/evalResult.ts';
import { evaluateReplica } from '../eval/evaluateReplica.ts';
import { evalTestSet } from './evalTestSet.ts';
import { configOfCheckpoint, dataInfoOf } from '../checkpoint/checkpointInfo.ts';
import { LoadedModel } from './loadModel.ts';
import { argmaxRows, classReport, type ClassReport } from '../eval/classMetrics.ts';

export interface EvaluateOptions {
  /** the YAML config the checkpoint was trained with; default: the one stored in it */
  configPath?: string;
  /** data directory (overrides the config's data.dir) */
  dataDir?: string;
  backend?: string;
  log?: (message: string) => void;
}

export interface Evaluation {
  checkpoint: string;
  testSamples: number;
  testLoss: number;
  testAccuracy: number;
  /** regression: MAE; multi-label: exact match; speech (loss ctc): greedy decoding's CER and WER */
  testMae?: number;
  testExactMatch?: number;
  testCER?: number;
  testWER?: number;
  /** classifiers: per-class figures and the confusion matrix */
  report?: ClassReport;
}

/** Evaluates `checkpoint` on its config's test set. */
export async function evaluateCheckpoint(checkpoint: string, o: EvaluateOptions = {}): Promise<Evaluation> {
  const { metadata } = readCheckpoint(checkpoint);
  const stored: RunConfig =
    o.configPath !== undefined ? loadConfig(o.configPath) : configOfCheckpoint(checkpoint, metadata);
  const config = applyOverrides(stored, { dataDir: o.dataDir, backend: o.backend });
  const backend = await inferenceBackend(config.train.backend);
  const replica = new Replica(backend, config);
  loadModelCheckpoint(checkpoint, replica.model);
  // a speech model's metadata describes its alphabet, not classes (transcribe.ts reads it)
  const info = config.loss.type === 'ctc' ? undefined : dataInfoOf(checkpoint, metadata, config, replica.classes);
  const { test, source } = await evalTestSet(config, info, replica.classes, o.log);
  if (!test) throw new Error(`eval: ${source} has no test set to evaluate ${checkpoint} on`);
  const r = await evaluateReplica(replica, test);
  const result: Evaluation = {
    checkpoint,
    testSamples: test.count,
    testLoss: r.loss,
    testAccuracy: r.accuracy,
    ...evalExtras(r),
  };
  // a speech model's figures are its error rates: no per-class report
  if (!info) return result;
  if (info.task !== 'classification' || test.count === 0) return result;
  const model = new LoadedModel(checkpoint, config, replica.model, backend, info);
  // the loaded test set is already in the model's input form (normalised as in training)
  const predicted = argmaxRows(model.forward(test.images, test.count), test.count);
  const names = info.classNames ?? Array.from({ length: replica.classes }, (_, c) => String(c));
  return { ...result, report: classReport(predicted, test.labels, names) };
}
