import { join } from 'node:path';
import { getBackend } from '../kernels/index.ts';
import { loadFashionMnist } from '../data/fashionMnist.ts';
import { limitDataset, type Dataset } from '../data/dataset.ts';
import { localStrategy } from '../parallel/strategy.ts';
import { Replica } from './replica.ts';
import { runTrainLoop, globalBatchSize } from './trainLoop.ts';
import { saveModelCheckpoint } from './modelCheckpoint.ts';
import { createRunDir } from './runDir.ts';
import { MetricsWriter } from './metrics.ts';
import type { RunConfig } from './runConfig.ts';
import type { EventSink, TrainEvent } from './events.ts';

export interface TrainOptions {
  /** run directory; default runs/<timestamp> with runs/latest pointing at it */
  out?: string;
  /** allow writing into a non-empty --out directory */
  force?: boolean;
  /** receives every event (progress display) */
  onEvent?: EventSink;
  /** notes for people (data source, fall-backs) */
  log?: (message: string) => void;
}

export interface TrainResult {
  runDir: string;
  testAccuracy: number;
  testLoss: number;
  samplesPerSecond: number;
  seconds: number;
  steps: number;
  checkpoint: string;
}

export interface LoadedData { train: Dataset; test: Dataset; source: string }

/** The configured dataset, limited as the config asks. */
export async function loadData(config: RunConfig, log?: (m: string) => void): Promise<LoadedData> {
  const data = await loadFashionMnist({ dir: config.data.dir, log });
  const train = config.data.trainLimit ? limitDataset(data.train, config.data.trainLimit) : data.train;
  const test = config.data.testLimit ? limitDataset(data.test, config.data.testLimit) : data.test;
  return { train, test, source: data.source };
}

/** Trains one model as configured, writing metrics.jsonl and checkpoints into the run directory. */
export async function train(config: RunConfig, options: TrainOptions = {}): Promise<TrainResult> {
  if (config.train.devices > 1) {
    throw new Error(`train.devices: ${config.train.devices} devices are not supported yet; use devices: 1`);
  }
  const backend = await getBackend(config.train.backend);
  const data = await loadData(config, options.log);
  const replica = new Replica(backend, config);
  if (replica.classes !== data.train.classes) {
    const last = config.model.layers.length - 1;
    throw new Error(`model.layers[${last}]: the model produces ${replica.classes} scores per sample but ${data.train.name} has ${data.train.classes} classes; set units: ${data.train.classes}`);
  }
  const runDir = createRunDir({ out: options.out, force: options.force });
  const metrics = new MetricsWriter(runDir, { truncate: options.force });
  const emit = (event: TrainEvent) => {
    metrics.write(event);
    options.onEvent?.(event);
  };
  const checkpoint = join(runDir, 'model.safetensors');
  const metadata = { config: JSON.stringify(config) };
  const globalBatch = globalBatchSize(config);
  const stepsPerEpoch = Math.ceil(data.train.count / globalBatch);
  const started = performance.now();
  let samples = 0, epochStart = started, epochLoss = 0, epochCorrect = 0, epochSamples = 0;
  let last = { loss: NaN, accuracy: NaN };

  emit({
    type: 'start', runDir, dataSource: data.source, backend: backend.name, devices: config.train.devices,
    strategy: config.train.strategy.type, parameters: replica.model.parameterCount, trainSamples: data.train.count,
    testSamples: data.test.count, epochs: config.train.epochs, stepsPerEpoch, globalBatch,
  });
  try {
    await runTrainLoop({
      replica, strategy: localStrategy, config, train: data.train, rank: 0, worldSize: 1,
      emit: (event) => {
        if (event.type === 'step') {
          samples += event.samples; epochSamples += event.samples;
          epochLoss += event.loss * event.samples; epochCorrect += event.accuracy * event.samples;
        }
        emit(event);
      },
      onEpochEnd: (epoch, step) => {
        const seconds = (performance.now() - epochStart) / 1000;
        emit({ type: 'epoch', epoch, loss: epochLoss / epochSamples, accuracy: epochCorrect / epochSamples,
          samples: epochSamples, seconds, samplesPerSecond: epochSamples / seconds });
        const lastEpoch = epoch === config.train.epochs - 1;
        const { evalEvery, checkpointEvery } = config.train;
        if (lastEpoch || (evalEvery > 0 && (epoch + 1) % evalEvery === 0)) {
          const r = replica.evaluate(data.test);
          last = { loss: r.loss, accuracy: r.accuracy };
          emit({ type: 'eval', epoch, step, testLoss: r.loss, testAccuracy: r.accuracy });
        }
        if (lastEpoch || (checkpointEvery > 0 && (epoch + 1) % checkpointEvery === 0)) {
          saveModelCheckpoint(checkpoint, replica.model, replica.optimizer, { ...metadata, epoch: String(epoch + 1), step: String(step) });
          emit({ type: 'checkpoint', epoch, path: checkpoint });
        }
        epochStart = performance.now(); epochLoss = 0; epochCorrect = 0; epochSamples = 0;
      },
    });
    const seconds = (performance.now() - started) / 1000;
    const result: TrainResult = {
      runDir, testAccuracy: last.accuracy, testLoss: last.loss, samplesPerSecond: samples / seconds, seconds,
      steps: stepsPerEpoch * config.train.epochs, checkpoint,
    };
    emit({ type: 'end', seconds, samplesPerSecond: result.samplesPerSecond, testAccuracy: last.accuracy, testLoss: last.loss });
    return result;
  } finally {
    metrics.close();
  }
}
