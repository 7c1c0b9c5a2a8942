/**
 * The sequence layers of the `model:` section (lstm, gru, conv1d, layerNorm) and the model input
 * shape, which may be a sequence `[frames, features]` with `null` frames (each batch decides).
 * See docs/speech.md.
 */
import type { Conv1DSpec, LayerNormSpec, RecurrentSpec } from '../../nn/spec.ts';
import type { ActivationKind } from '../../kernels/activation.ts';
import { VARIABLE } from '../../tensor/shape.ts';
import { bool, field, isInt, isNum, oneOf, posInt, posNum, strict } from './fields.ts';

const ACTIVATIONS = ['relu', 'clippedRelu', 'tanh', 'sigmoid', 'linear'] as const satisfies readonly ActivationKind[];
const MERGES = ['concat', 'sum'] as const;
const num = () => field<number>((v) => isNum(v), 'expected a number');

const lstm = strict({
  units: posInt(),
  returnSequences: bool().default(true),
  bidirectional: oneOf(MERGES).optional(),
  forgetBias: num().default(1),
}).transform(
  (o): RecurrentSpec => ({
    type: 'lstm',
    units: o.units,
    returnSequences: o.returnSequences,
    forgetBias: o.forgetBias,
    ...(o.bidirectional ? { bidirectional: o.bidirectional } : {}),
  }),
);

const gru = strict({
  units: posInt(),
  returnSequences: bool().default(true),
  bidirectional: oneOf(MERGES).optional(),
}).transform(
  (o): RecurrentSpec => ({
    type: 'gru',
    units: o.units,
    returnSequences: o.returnSequences,
    ...(o.bidirectional ? { bidirectional: o.bidirectional } : {}),
  }),
);

const conv1d = strict({
  filters: posInt(),
  kernelSize: posInt(),
  strides: posInt().default(1),
  padding: oneOf(['valid', 'same'] as const).default('valid'),
  activation: oneOf(ACTIVATIONS).default('linear'),
  useBias: bool().default(true),
}).transform((o): Conv1DSpec => ({ type: 'conv1d', ...o }));

const layerNorm = strict({ epsilon: posNum().default(1e-5) }).transform(
  (o): LayerNormSpec => ({ type: 'layerNorm', epsilon: o.epsilon }),
);

export const SEQUENCE_LAYERS = { lstm, gru, conv1d, layerNorm };

const dim = (v: unknown) => isInt(v) && v > 0;

/**
 * model.input: [features], [height, width, channels], or a sequence [frames, features] whose frames
 * may be `null` (variable: each batch decides, as Keras's None); null becomes VARIABLE in the spec.
 */
export const modelInput = field<(number | null)[]>(
  (v) =>
    Array.isArray(v) &&
    (v.length === 1 || v.length === 3 ? v.every(dim) : v.length === 2 && (v[0] === null || dim(v[0])) && dim(v[1])),
  'expected [height, width, channels], [features] or a sequence [frames, features] (frames null when variable) of positive integers',
).transform((v) => v.map((d) => d ?? VARIABLE));
