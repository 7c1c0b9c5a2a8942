/**
 * RunConfig → YAML: `configToYaml(config)` writes a config back in YAML form (it parses back to the
 * same config), e.g. to save the resolved config next to a run's metrics.
 */
import { Document, isScalar, visit } from 'yaml';
import type { RunConfig } from './runConfig.ts';
import type { LayerSpec, LossSpec } from '../nn/spec.ts';
import { VARIABLE } from '../tensor/shape.ts';
import type { OptimizerSpec, DecaySpec } from '../optim/spec.ts';
import type { StrategySpec } from '../parallel/strategies/index.ts';

/** The YAML form of a normalised config: `parseConfig(toYamlForm(c))` deep-equals `c`. */
export function toYamlForm(config: RunConfig): Record<string, unknown> {
  return {
    // a variable dimension (sequence frames) is written as the config writes it: null
    model: {
      input: config.model.input.map((d) => (d === VARIABLE ? null : d)),
      layers: config.model.layers.map(layerToYaml),
    },
    loss: lossToYaml(config.loss),
    optimizer: optimizerToYaml(config.optimizer),
    schedule: { warmupSteps: config.schedule.warmupSteps, decay: decayToYaml(config.schedule.decay) },
    data: { ...config.data },
    train: { ...config.train, strategy: strategyToYaml(config.train.strategy) },
  };
}

function oneKey<T extends { type: string }>(spec: T): Record<string, Record<string, unknown>> {
  const { type, ...rest } = spec;
  const opts: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(rest)) if (v !== undefined) opts[k] = Array.isArray(v) ? [...v] : v;
  return { [type]: opts };
}
const layerToYaml = (l: LayerSpec): Record<string, Record<string, unknown>> => {
  switch (l.type) {
    case 'spatialSplit':
      return {
        spatialSplit: {
          tiles: [...l.tiles],
          ...(l.parallel ? { parallel: l.parallel } : {}),
          layers: l.layers.map(layerToYaml),
        },
      };
    case 'residual':
      return {
        residual: {
          layers: l.layers.map(layerToYaml),
          shortcut: l.shortcut.map(layerToYaml),
          activation: l.activation,
        },
      };
    case 'add':
      return { add: { branches: l.branches.map((b) => b.map(layerToYaml)), activation: l.activation } };
    case 'positionEncoding':
      return { positionEncoding: { encoding: l.encoding } };
    default:
      return oneKey(l);
  }
};
/** A bare name when the loss has no options to say. */
const lossToYaml = (l: LossSpec): string | Record<string, unknown> =>
  l.type === 'softmaxCrossEntropy' && l.labelSmoothing > 0 ? { ...l } : l.type;
const optimizerToYaml = (o: OptimizerSpec) => oneKey(o);
const decayToYaml = (d: DecaySpec) => oneKey(d);
/** A strategy's options; an optimizer among them (diloco's `outer`) written as `optimizer:` is, a compression as its one-key map. */
const strategyToYaml = (s: StrategySpec) => {
  const opts = oneKey(s)[s.type]!;
  if (s.type === 'diloco') opts.outer = optimizerToYaml(s.outer);
  if ('compression' in s && s.compression) opts.compression = oneKey(s.compression);
  return { [s.type]: opts };
};

/** The config as YAML text (e.g. to save the resolved config next to a run's metrics). */
export function configToYaml(config: RunConfig): string {
  const doc = new Document(toYamlForm(config));
  // `[3, 3]` and `{}` on one line, like people write them
  visit(doc, {
    Seq(_, node) {
      if (node.items.every((x) => isScalar(x))) node.flow = true;
    },
    Map(_, node) {
      if (node.items.length === 0) node.flow = true;
    },
  });
  return doc.toString();
}
