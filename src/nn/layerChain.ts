import type { Tensor } from '../tensor/tensor.ts';
import type { Backend } from '../kernels/backend.ts';
import {
  BaseLayer,
  allLayers,
  bindInTurn,
  type ForwardContext,
  type Layer,
  type ParamSpec,
  type StateSpec,
} from './layer.ts';
import { communicates, runLater, runNow, settle, type Pass } from './pass.ts';

/** One layer of a chain and the prefix of its tensors' names ('attn': 'attn.layers.1.in_proj_weight'). */
export interface ChainPart {
  prefix: string;
  layer: Layer;
}

/**
 * Layers run one after another as ONE layer of the model (a transformer block's two residual
 * blocks): its parts' parameters and state are its own, named '<prefix>.<name>', contiguous in the
 * flat layout, and the model announces its gradients ready once all of it has run backward. Parts
 * that communicate (synchronised BatchNorm) run through the async passes.
 */
export class LayerChain extends BaseLayer {
  readonly outputShape: readonly number[];
  private readonly layers: Layer[];

  constructor(
    backend: Backend,
    name: string,
    inputShape: readonly number[],
    readonly parts: readonly ChainPart[],
  ) {
    super(backend, name, inputShape);
    if (!parts.length) throw this.error('has no layers');
    this.layers = parts.map((p) => p.layer);
    this.outputShape = this.layers[this.layers.length - 1]!.outputShape;
  }

  override params(): ParamSpec[] {
    return this.parts.flatMap((p) => p.layer.params().map((s) => ({ ...s, name: `${p.prefix}.${s.name}` })));
  }

  override state(): StateSpec[] {
    return this.parts.flatMap((p) => p.layer.state().map((s) => ({ ...s, name: `${p.prefix}.${s.name}` })));
  }

  override bind(params: Float32Array[], grads: Float32Array[], state: Float32Array[]): void {
    bindInTurn(this.layers, params, grads, state);
  }

  get needsAsync(): boolean {
    return this.layers.some((l) => l.needsAsync === true);
  }

  sublayers(): readonly Layer[] {
    return this.layers;
  }

  outputLengths(lengths: Int32Array): Int32Array {
    return this.layers.reduce((l, layer) => layer.outputLengths?.(l) ?? l, lengths);
  }

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    return runNow(this.forwardPass(x, ctx, false));
  }

  forwardAsync(x: Tensor, ctx: ForwardContext): Promise<Tensor> {
    return runLater(this.forwardPass(x, ctx, true));
  }

  private *forwardPass(x: Tensor, ctx: ForwardContext, communicating: boolean): Pass<Tensor> {
    let h = x;
    for (const l of this.layers) {
      h = communicates(l, communicating) ? yield* settle(l.forwardAsync!(h, ctx)) : l.forward(h, ctx);
      // a part that shortens time hands the next one its output's lengths
      if (ctx.lengths && l.outputLengths) ctx = { ...ctx, lengths: l.outputLengths(ctx.lengths) };
    }
    return h;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    return allLayers(this.layers).flatMap((l) => (l.sublayers ? [] : [...(l.savedForBackward?.() ?? [])]));
  }

  backward(dy: Tensor, needInputGrad = true): Tensor | null {
    return runNow(this.backwardPass(dy, needInputGrad, false));
  }

  backwardAsync(dy: Tensor, needInputGrad = true): Promise<Tensor | null> {
    return runLater(this.backwardPass(dy, needInputGrad, true));
  }

  private *backwardPass(dy: Tensor, needInputGrad: boolean, communicating: boolean): Pass<Tensor | null> {
    let g: Tensor | null = dy;
    for (let k = this.layers.length - 1; k >= 0 && g; k--) {
      const l = this.layers[k]!,
        need = k > 0 || needInputGrad;
      g = communicates(l, communicating) ? yield* settle(l.backwardAsync!(g, need)) : l.backward(g, need);
    }
    return g;
  }
}
