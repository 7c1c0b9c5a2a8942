import { Tensor } from '../tensor/tensor.ts';
import { formatShape, shapesEqual } from '../tensor/shape.ts';
import type { ActivationKind } from '../kernels/activation.ts';
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
import { ActivationLayer } from './activationLayer.ts';
import { communicates, runLater, runNow, settle, type Pass } from './pass.ts';

/** One branch of an add block: its layers (none: the identity) and the prefix of its tensors' names. */
export interface Branch {
  layers: Layer[];
  /** 'layers', 'shortcut', 'branches.1': tensors are named '<prefix>.<k>.<name>' inside the block */
  prefix: string;
  /** how config paths name it: 'model.layers[3].residual.layers', for messages */
  path: string;
}

/**
 * Sum of branches, then an optional activation: y = act(Σ_b branch_b(x)), a branch being a stack of
 * layers or the identity. A residual block is the pair (layers, shortcut): y = act(layers(x) + shortcut(x)).
 *
 * It is ONE layer of the model: its nested layers' parameters and state are its own, in branch
 * order, so the flat layout places them contiguously inside the one flat buffer (nn/flatLayout.ts)
 * and a checkpoint names them `layers.<i>.<prefix>.<k>.kernel`; the model announces the block's
 * gradients ready (bucketed hybrid) once the whole block has run backward. Nested layers that
 * communicate (synchronised BatchNorm) run through the async passes; `sublayers()` exposes them.
 */
export class AddBlock extends BaseLayer {
  readonly outputShape: readonly number[];
  private readonly act: ActivationLayer | null;
  private readonly children: Layer[];

  constructor(
    backend: Backend,
    name: string,
    inputShape: readonly number[],
    readonly branches: readonly Branch[],
    readonly activation: ActivationKind = 'linear',
  ) {
    super(backend, name, inputShape);
    if (branches.length < 2)
      throw this.error('needs at least two branches to add (a branch without layers is the identity)');
    const ends = branches.map((b) => (b.layers.length ? b.layers[b.layers.length - 1]!.outputShape : inputShape));
    const first = ends[0]!;
    ends.forEach((shape, b) => {
      if (!shapesEqual(shape, first)) throw this.error(mismatch(branches, ends, inputShape, b));
    });
    this.outputShape = first;
    this.act =
      activation === 'linear'
        ? null
        : new ActivationLayer(backend, `${name} activation ${activation}`, first, activation);
    this.children = branches.flatMap((b) => b.layers);
  }

  override params(): ParamSpec[] {
    return this.branches.flatMap((b) =>
      b.layers.flatMap((l, k) => l.params().map((p) => ({ ...p, name: `${b.prefix}.${k}.${p.name}` }))),
    );
  }

  override state(): StateSpec[] {
    return this.branches.flatMap((b) =>
      b.layers.flatMap((l, k) => l.state().map((s) => ({ ...s, name: `${b.prefix}.${k}.${s.name}` }))),
    );
  }

  override bind(params: Float32Array[], grads: Float32Array[], state: Float32Array[]): void {
    bindInTurn(this.children, params, grads, state);
  }

  get needsAsync(): boolean {
    return this.children.some((l) => l.needsAsync === true);
  }

  sublayers(): readonly Layer[] {
    return this.act ? [...this.children, this.act] : this.children;
  }

  forward(x: Tensor, ctx: ForwardContext): Tensor {
    return runNow(this.forwardPass(x, ctx, false));
  }

  forwardAsync(x: Tensor, ctx: ForwardContext): Promise<Tensor> {
    return runLater(this.forwardPass(x, ctx, true));
  }

  /** Every branch in order, then their sum; with `communicating`, a layer that needs to communicates (pass.ts). */
  private *forwardPass(x: Tensor, ctx: ForwardContext, communicating: boolean): Pass<Tensor> {
    const outs: Tensor[] = [];
    for (const b of this.branches) {
      let h = x;
      for (const l of b.layers)
        h = communicates(l, communicating) ? yield* settle(l.forwardAsync!(h, ctx)) : l.forward(h, ctx);
      outs.push(h);
    }
    return this.finish(outs, ctx);
  }

  /** Σ of the branch outputs into the block's own array, then the activation. */
  private finish(outs: Tensor[], ctx: ForwardContext): Tensor {
    const sum = new Tensor([outs[0]!.batch, ...this.outputShape], this.buffer('sum', outs[0]!.size));
    addAll(
      this.backend,
      outs.map((o) => o.data),
      sum.data,
    );
    return this.act ? this.act.forward(sum, ctx) : sum;
  }

  savedForBackward(): readonly ArrayBufferView[] {
    return allLayers(this.sublayers()).flatMap((l) => (l.sublayers ? [] : [...(l.savedForBackward?.() ?? [])]));
  }

  backward(dy: Tensor, needInputGrad = true): Tensor | null {
    return runNow(this.backwardPass(dy, needInputGrad, false));
  }

  backwardAsync(dy: Tensor, needInputGrad = true): Promise<Tensor | null> {
    return runLater(this.backwardPass(dy, needInputGrad, true));
  }

  /** The activation's backward, every branch's in order, then the sum of their input gradients. */
  private *backwardPass(dy: Tensor, needInputGrad: boolean, communicating: boolean): Pass<Tensor | null> {
    const ds = this.act ? this.act.backward(dy) : dy;
    const grads: (Tensor | null)[] = [];
    for (const b of this.branches) {
      let g: Tensor | null = ds;
      for (let k = b.layers.length - 1; k >= 0 && g; k--) {
        const l = b.layers[k]!,
          need = k > 0 || needInputGrad;
        g = communicates(l, communicating) ? yield* settle(l.backwardAsync!(g, need)) : l.backward(g, need);
      }
      grads.push(g);
    }
    return this.inputGrad(grads, needInputGrad);
  }

  /** dL/dx: the sum of every branch's input gradient (into the block's own array: a branch may hand back dy itself). */
  private inputGrad(grads: (Tensor | null)[], needInputGrad: boolean): Tensor | null {
    if (!needInputGrad) return null;
    const batch = grads[0]!.batch;
    const dx = new Tensor([batch, ...this.inputShape], this.buffer('dx', grads[0]!.size));
    addAll(
      this.backend,
      grads.map((g) => g!.data),
      dx.data,
    );
    return dx;
  }
}

/** The start of the one row `copyRows` copies: a whole array. */
const WHOLE = new Int32Array(1);

/**
 * into = Σ arrays (all of into's length), by the backend: the first copied (one row of copyRows),
 * then float32 adds (axpy with α = 1), so the arrays stay where the backend keeps them (a GPU).
 */
function addAll(backend: Backend, arrays: Float32Array[], into: Float32Array): void {
  backend.copyRows(arrays[0]!.subarray(0, into.length), WHOLE, into, WHOLE, 1, into.length, false);
  for (let a = 1; a < arrays.length; a++) backend.axpy(1, arrays[a]!.subarray(0, into.length), into);
}

/** Why branch `b` cannot be added to branch 0, and the projection that would fix a residual shortcut. */
function mismatch(
  branches: readonly Branch[],
  ends: readonly (readonly number[])[],
  input: readonly number[],
  b: number,
): string {
  const says = (k: number) =>
    `${branches[k]!.path} ${branches[k]!.layers.length ? 'ends in' : 'is the identity:'} ${formatShape(ends[k]!)}`;
  const head = `its branches must end in the same shape to be added, but ${says(0)} and ${says(b)}`;
  const out = ends[0]!;
  if (input.length === 3 && out.length === 3) {
    const stride = input[0]! / out[0]!;
    const s = Number.isInteger(stride) && stride >= 1 && input[1]! / out[1]! === stride ? stride : null;
    if (s !== null) {
      return `${head}; project the shortcut, e.g. shortcut: [ { conv2d: { filters: ${out[2]}, kernelSize: 1${s > 1 ? `, strides: ${s}` : ''} } } ]`;
    }
  }
  if (out.length === 1) {
    return `${head}; project the shortcut, e.g. shortcut: [ ${input.length === 1 ? '' : '{ flatten: {} }, '}{ dense: { units: ${out[0]} } } ]`;
  }
  return `${head}; change the layers so that every branch ends in the same shape`;
}
