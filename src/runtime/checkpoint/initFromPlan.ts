/**
 * Fine-tuning's plan, made before any work: `train.initFrom` (or the `initFrom` option, which
 * replaces its path or the whole of it) checked against the model and the checkpoint. The layer
 * names of `reinit` and `freeze` must be layers of the model with weights; `reinit: mismatched`
 * becomes the list of layers whose tensors differ from the checkpoint's, which the run records; every
 * other layer must fit the checkpoint exactly, or the error names the tensor, both shapes and the fix.
 */
import { resolve } from 'node:path';
import { readCheckpoint } from './checkpoint.ts';
import { jsBackend } from '../../kernels/js/index.ts';
import { buildLayer, checkOutputShape } from '../../nn/buildLayer.ts';
import { checkModelInput } from '../../nn/sequence.ts';
import type { ModelSpec } from '../../nn/spec.ts';
import { formatShape, shapesEqual } from '../../tensor/shape.ts';
import type { InitFromSpec, RunConfig } from '../../config/runConfig.ts';
import { parseInitFrom } from '../../config/schema/initFrom.ts';
import { ConfigError, formatIssues, formatPath } from '../../config/errors.ts';

/** One layer of the model: its name (`layers.N`), type, and its tensors as a checkpoint names them. */
export interface LayerTensors {
  name: string;
  index: number;
  type: string;
  tensors: { name: string; shape: number[] }[];
}

/** The layers of `spec` with their tensors (parameters and state), built without allocating them. */
export function layerTensors(spec: ModelSpec): LayerTensors[] {
  checkModelInput(spec.input);
  let shape: readonly number[] = spec.input;
  return spec.layers.map((layerSpec, index) => {
    const layer = buildLayer(jsBackend, layerSpec, index, shape);
    checkOutputShape(layer, shape);
    shape = layer.outputShape;
    const name = `layers.${index}`;
    const tensors = [...layer.params(), ...layer.state()].map((t) => ({ name: `${name}.${t.name}`, shape: t.shape }));
    return { name, index, type: layerSpec.type, tensors };
  });
}

/** `layers.3` of 'layers.3.kernel' (undefined for a name outside model.layers). */
export const layerOfTensor = (tensor: string): string | undefined => /^layers\.\d+(?=\.)/.exec(tensor)?.[0];

const described = (l: LayerTensors) => `${l.name} (${l.type})`;
const withWeights = (layers: readonly LayerTensors[]) => layers.filter((l) => l.tensors.length > 0);

/** Refuses names in `field` that are not layers of the model with weights, naming them and listing the ones it has. */
function checkNames(field: string, names: readonly string[], layers: readonly LayerTensors[]): void {
  const byName = new Map(layers.map((l) => [l.name, l]));
  const unknown = names.filter((n) => !byName.has(n));
  const empty = names.filter((n) => byName.get(n)?.tensors.length === 0).map((n) => described(byName.get(n)!));
  if (!unknown.length && !empty.length) return;
  const problems = [
    ...(unknown.length ? [`the model has no layer ${unknown.map((n) => `'${n}'`).join(', ')}`] : []),
    ...(empty.length ? [`${empty.join(', ')} ${empty.length === 1 ? 'has' : 'have'} no weights`] : []),
  ];
  throw new ConfigError([
    `initFrom.${field}: ${problems.join('; ')}; the model's layers with weights are ${withWeights(layers).map(described).join(', ')}`,
  ]);
}

/** The spec a run starts from: the config's, with the fields the option gives (a string: the path) in their place. */
function specOf(config: RunConfig, option: unknown): InitFromSpec | undefined {
  const own = config.train.initFrom;
  if (option === undefined) return own;
  if (typeof option === 'string' && option !== '') return { reinit: [], freeze: [], ...own, path: option };
  const r = parseInitFrom(option !== null && typeof option === 'object' ? { ...own, ...option } : option);
  if (r.issues)
    throw new ConfigError(
      formatIssues(r.issues, option, 'train options', { label: (path) => formatPath(['initFrom', ...path]) }),
    );
  return r.spec;
}

/** How a layer's tensors differ from the checkpoint's (undefined: they fit exactly). */
function difference(layer: LayerTensors, saved: ReadonlyMap<string, { shape: number[] }>): string | undefined {
  for (const t of layer.tensors) {
    const s = saved.get(t.name);
    if (!s) return `the checkpoint has no ${t.name.slice(layer.name.length + 1)}`;
    if (!shapesEqual(s.shape, t.shape))
      return `${t.name.slice(layer.name.length + 1)} ${formatShape(s.shape)} in the checkpoint, ${formatShape(t.shape)} here`;
  }
  const own = new Set(layer.tensors.map((t) => t.name));
  const extra = [...saved.keys()].find((n) => layerOfTensor(n) === layer.name && !own.has(n));
  return extra === undefined ? undefined : `the checkpoint has a ${extra.slice(layer.name.length + 1)} it lacks`;
}

/**
 * The layers that start fresh (`reinit` resolved against the checkpoint at `path`); every other
 * layer must fit it exactly. Logs one line naming the fresh layers.
 */
function chooseFresh(
  path: string,
  reinit: InitFromSpec['reinit'],
  layers: readonly LayerTensors[],
  log?: (m: string) => void,
): string[] {
  const saved = readCheckpoint(path).tensors;
  const fresh = new Set(
    reinit === 'mismatched'
      ? withWeights(layers)
          .filter((l) => difference(l, saved) !== undefined)
          .map((l) => l.name)
      : reinit,
  );
  const hint = (layer: string) =>
    `to start ${layer} from fresh weights instead, set train.initFrom.reinit: mismatched (or pass --reinit mismatched)`;
  for (const layer of layers) {
    if (fresh.has(layer.name)) continue;
    for (const t of layer.tensors) {
      const s = saved.get(t.name);
      if (!s)
        throw new Error(
          `checkpoint ${path} has no tensor '${t.name}': it was written for a different model (compare the model.layers of both configs; ${hint(layer.name)})`,
        );
      if (!shapesEqual(s.shape, t.shape))
        throw new Error(
          `checkpoint ${path}: '${t.name}' has shape ${formatShape(s.shape)}, the model needs ${formatShape(t.shape)}; it was written for a different model (${hint(layer.name)})`,
        );
    }
  }
  const known = new Set(layers.flatMap((l) => l.tensors.map((t) => t.name)));
  const extra = [...saved.keys()].find(
    (n) => n.startsWith('layers.') && !known.has(n) && !fresh.has(layerOfTensor(n) ?? ''),
  );
  if (extra)
    throw new Error(
      `--init-from ${path}: the checkpoint has a tensor '${extra}' the config's model lacks; it was written for a different model (compare the model.layers of both configs)`,
    );
  const weighted = withWeights(layers);
  if (weighted.length > 0 && weighted.every((l) => fresh.has(l.name)))
    throw new Error(
      `--init-from ${path}: no layer of the model takes its weights from the checkpoint (every one is reinitialised); it was written for a different model, or leave --init-from out to start fresh`,
    );
  const chosen = layers.filter((l) => fresh.has(l.name));
  if (chosen.length)
    log?.(
      `--init-from ${path}: fresh weights for ${chosen.map((l) => `${l.name} (${l.type}${reinit === 'mismatched' ? `: ${difference(l, saved)}` : ''})`).join(', ')}; every other layer from the checkpoint`,
    );
  return chosen.map((l) => l.name);
}

/**
 * The config a run starts with: its `train.initFrom` (replaced by the `initFrom` option when given)
 * checked against the model and, for a new run, the checkpoint, with its path absolute and
 * `reinit` the list of layers that start fresh. A resumed run takes its weights from its own
 * checkpoint set, so only the layer names are checked. Logs the fresh and the frozen layers.
 */
export function planInitFrom(
  config: RunConfig,
  option: unknown,
  o: { resume: boolean; log?: (m: string) => void },
): RunConfig {
  const spec = specOf(config, option);
  if (!spec) return config;
  const layers = layerTensors(config.model);
  if (spec.reinit !== 'mismatched') checkNames('reinit', spec.reinit, layers);
  checkNames('freeze', spec.freeze, layers);
  const path = resolve(spec.path);
  const reinit = o.resume ? spec.reinit : chooseFresh(path, spec.reinit, layers, o.log);
  const both = spec.freeze.filter((n) => Array.isArray(reinit) && reinit.includes(n));
  if (both.length)
    throw new ConfigError([
      `initFrom: ${both.join(', ')} would be reinitialised and frozen, keeping random weights; leave ${both.length === 1 ? 'it' : 'them'} out of freeze or of reinit`,
    ]);
  if (spec.freeze.length) {
    const frozen = layers.filter((l) => spec.freeze.includes(l.name));
    o.log?.(`frozen (their weights are not trained): ${frozen.map(described).join(', ')}`);
  }
  return { ...config, train: { ...config.train, initFrom: { path, reinit, freeze: spec.freeze } } };
}
