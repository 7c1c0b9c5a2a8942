/**
 * A trained model for inference: `loadModel(checkpoint)` reads a model checkpoint
 * (`model.safetensors`), builds the model its stored config describes (or the config given),
 * loads the weights and returns a `LoadedModel` whose `predict(inputs)` applies the checkpoint's
 * normalisation and names the classes (checkpointInfo.ts).
 */
import { inferenceBackend } from './inferenceBackend.ts';
import type { Backend } from '../../kernels/backend.ts';
import { buildModel, type Sequential } from '../../nn/model.ts';
import { Tensor } from '../../tensor/tensor.ts';
import type { ForwardContext } from '../../nn/layer.ts';
import type { RunConfig } from '../../config/runConfig.ts';
import { loadConfig } from '../../config/load.ts';
import { resolveConfig, type ConfigInput } from '../../config/inCode.ts';
import { readCheckpoint } from '../checkpoint/checkpoint.ts';
import { loadModelCheckpoint } from '../checkpoint/modelCheckpoint.ts';
import { configOfCheckpoint, dataInfoOf, type DataInfo, type Task } from '../checkpoint/checkpointInfo.ts';
import { normalizeInPlace, packInputs, toPredictions, type PredictInput, type Prediction } from './predict.ts';

/** Options of `loadModel`. */
export interface LoadModelOptions {
  /** the config the checkpoint was trained with (a YAML path, a config object or a RunConfig); default: the one stored in the checkpoint */
  config?: string | ConfigInput | RunConfig;
  /** kernel backend: js | wasm | native | auto; default: the config's train.backend */
  backend?: string;
}

/** Samples per forward pass: bounds the activations' memory on large inputs. */
const BATCH = 256;
const EVAL: ForwardContext = { training: false, seed: 0, step: 0, sampleOffset: 0 };

/** A trained model, ready to predict. */
export class LoadedModel {
  /** the checkpoint file it was read from */
  readonly checkpoint: string;
  /** the run configuration the model was built from */
  readonly config: RunConfig;
  /** what the model predicts: a class, labels (multi-label) or values (regression) */
  readonly task: Task;
  /** one sample's shape, as `predict` takes it ([H, W, C] images, NHWC, or [features]) */
  readonly inputShape: readonly number[];
  /** scores (classes, labels or values) per sample */
  readonly outputs: number;
  /** a name per class or label, when the checkpoint (or the dataset) names them */
  readonly classNames: readonly string[] | undefined;
  /** the per-channel normalisation predict applies to raw inputs, when training used one */
  readonly normalization: DataInfo['normalization'];
  /** a CSV run's columns by header name: predict reads CSV files with a header by them */
  readonly columns: DataInfo['columns'];
  private readonly model: Sequential;
  private readonly backend: Backend;
  private input: Float32Array = new Float32Array(0);
  /** the last layer already computes the task's output function (softmax / sigmoid) */
  private readonly applied: boolean;

  /** Use `loadModel(checkpoint)`; this wraps a model whose weights are loaded. @internal */
  constructor(checkpoint: string, config: RunConfig, model: Sequential, backend: Backend, data: DataInfo) {
    this.checkpoint = checkpoint;
    this.config = config;
    this.model = model;
    this.backend = backend;
    this.task = data.task;
    this.inputShape = [...model.inputShape];
    this.outputs = model.outputShape[0]!;
    this.classNames = data.classNames;
    this.normalization = data.normalization;
    this.columns = data.columns;
    const last = config.model.layers[config.model.layers.length - 1]!.type as string;
    this.applied =
      (this.task === 'classification' && last === 'softmax') || (this.task === 'multiLabel' && last === 'sigmoid');
  }

  /**
   * Predictions for `inputs`: raw samples as the training data held them before normalisation
   * (images scaled to [0, 1], NHWC; a CSV row's feature values), either one flat array of
   * `count × values per sample` numbers or one entry per sample (flat or nested).
   */
  predict(inputs: PredictInput): Prediction[] {
    const { data, count } = packInputs(inputs, this.inputShape);
    normalizeInPlace(data, this.normalization);
    return toPredictions(this.forward(data, count), count, this.task, this.classNames, this.applied);
  }

  /**
   * The model's raw outputs (logits for classification) for `count` samples that are already
   * normalised (as a loaded dataset is): count × outputs values.
   */
  forward(data: Float32Array, count: number): Float32Array {
    const per = data.length / count;
    const out = new Float32Array(count * this.outputs);
    for (let start = 0; start < count; start += BATCH) {
      const n = Math.min(BATCH, count - start);
      // backend-owned memory, so the wasm backend computes without a copy
      if (this.input.length < n * per) this.input = this.backend.alloc(n * per);
      const x = this.input.length === n * per ? this.input : this.input.subarray(0, n * per);
      x.set(data.subarray(start * per, (start + n) * per));
      const y = this.model.forward(new Tensor([n, ...this.inputShape], x), EVAL);
      out.set(y.data.subarray(0, n * this.outputs), start * this.outputs);
    }
    return out;
  }
}

/**
 * Reads a model checkpoint (a `model.safetensors` written by `train`) and returns the model, ready
 * to `predict`. The config comes from the checkpoint's metadata unless `options.config` is given;
 * normalisation and class names from its `paratrain.data` metadata.
 */
export async function loadModel(checkpoint: string, options: LoadModelOptions = {}): Promise<LoadedModel> {
  const { metadata } = readCheckpoint(checkpoint);
  const config =
    options.config === undefined
      ? configOfCheckpoint(checkpoint, metadata)
      : typeof options.config === 'string'
        ? loadConfig(options.config)
        : resolveConfig(options.config);
  const backend = await inferenceBackend(options.backend ?? config.train.backend);
  const model = buildModel(backend, config.model);
  loadModelCheckpoint(checkpoint, model);
  if (model.outputShape.length !== 1) {
    throw new Error(
      `checkpoint ${checkpoint}: the model's output is ${model.outputShape.join('×')} per sample; predict needs one score per class or value (end with dense)`,
    );
  }
  return new LoadedModel(
    checkpoint,
    config,
    model,
    backend,
    dataInfoOf(checkpoint, metadata, config, model.outputShape[0]!),
  );
}

/** `model.predict(inputs)`, as a function. */
export function predict(model: LoadedModel, inputs: PredictInput): Prediction[] {
  return model.predict(inputs);
}
