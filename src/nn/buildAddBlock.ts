import type { Backend } from '../kernels/backend.ts';
import { hashInts } from '../tensor/rng.ts';
import type { Layer } from './layer.ts';
import type { AddSpec, LayerSpec, ResidualSpec } from './spec.ts';
import { AddBlock, type Branch } from './addBlock.ts';

/** Builds (and checks) one nested layer: spec, dropout key, input shape, name. */
export type NestedBuilder = (spec: LayerSpec, key: number, inputShape: readonly number[], name: string) => Layer;

/**
 * A `residual` or `add` block from its spec. `name` is 'model.layers[3] residual'; nested layers are
 * named by their config path ('model.layers[3].residual.layers[1] conv2d') so shape errors point at
 * the line to fix. `key` (the top-level index, or a nested block's key) keys nested dropout masks:
 * each nested layer gets its own key, distinct from every top-level index.
 */
export function buildAddBlock(
  backend: Backend,
  spec: ResidualSpec | AddSpec,
  key: number,
  inputShape: readonly number[],
  name: string,
  build: NestedBuilder,
): AddBlock {
  const path = name.endsWith(` ${spec.type}`) ? name.slice(0, -spec.type.length - 1) : name;
  const lists: { layers: LayerSpec[]; prefix: string; path: string }[] =
    spec.type === 'residual'
      ? [
          { layers: spec.layers, prefix: 'layers', path: `${path}.residual.layers` },
          { layers: spec.shortcut, prefix: 'shortcut', path: `${path}.residual.shortcut` },
        ]
      : spec.branches.map((layers, b) => ({ layers, prefix: `branches.${b}`, path: `${path}.add.branches[${b}]` }));
  if (spec.type === 'residual' && !spec.layers.length) {
    throw new Error(
      `${name}: has no layers; list the block's layers under layers: (the shortcut is added to their output)`,
    );
  }
  const branches: Branch[] = lists.map((list, b) => {
    let shape = inputShape;
    const layers = list.layers.map((inner, k) => {
      if (inner.type === 'spatialSplit') {
        throw new Error(
          `${list.path}[${k}] spatialSplit: cannot be inside a ${spec.type} block; split the layers before or after the block`,
        );
      }
      // top bit set: never equal to a top-level layer index
      const layer = build(inner, (hashInts(key, b, k) | 0x80000000) >>> 0, shape, `${list.path}[${k}] ${inner.type}`);
      shape = layer.outputShape;
      return layer;
    });
    return { layers, prefix: list.prefix, path: list.path };
  });
  return new AddBlock(backend, name, inputShape, branches, spec.activation);
}
