import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { jsBackend } from '../../src/kernels/js/index.ts';
import { createWasmBackend } from '../../src/kernels/wasm/index.ts';
import { createNativeBackend } from '../../src/kernels/native/index.ts';
import { createOneDnnBackend } from '../../src/kernels/onednn/index.ts';
import type { Backend } from '../../src/kernels/backend.ts';
import { Tensor } from '../../src/tensor/tensor.ts';
import { Attention } from '../../src/nn/attention.ts';
import { Sequential } from '../../src/nn/model.ts';
import { assertClose } from '../util/close.ts';
import { TRAIN_CTX } from './gradcheck.ts';

// Values from PyTorch's nn.MultiheadAttention (fixtures/attention-torch.py writes fixtures/attention-torch.json).
const ref = JSON.parse(readFileSync(new URL('./fixtures/attention-torch.json', import.meta.url), 'utf8'));
const f32 = (v: number[]) => Float32Array.from(v);
const TOL = { rtol: 1e-5, atol: 1e-6 };
// every CPU backend built here: each runs attention's products through its own gemm
const built = [await createWasmBackend(), await createNativeBackend(), await createOneDnnBackend()];
const backends: Backend[] = [jsBackend, ...built.filter((b): b is NonNullable<typeof b> => b !== null)];

/** The layer with PyTorch's parameters, copied by name: the layouts are the same. */
function withTorchParams(b: Backend, causal: boolean): { layer: Attention; model: Sequential } {
  const [, T, D] = ref.shape as number[];
  const layer = new Attention(b, 'attention', [T!, D!], { heads: ref.heads, causal, dropout: 0 }, 0);
  const model = new Sequential(b, [layer], layer.inputShape);
  for (const e of model.paramEntries) {
    const name = e.name.replace(/^layers\.0\./, '');
    assert.ok(name in ref.params, `PyTorch has no parameter ${name}`);
    model.params.set(f32(ref.params[name]), e.offset);
  }
  return { layer, model };
}

for (const c of ref.cases as {
  causal: boolean;
  lengths: number[] | null;
  r: number[];
  y: number[];
  dx: number[];
  grads: Record<string, number[]>;
}[]) {
  const what = `causal ${c.causal}, lengths ${c.lengths ? `[${c.lengths.join(', ')}]` : 'none'}`;
  test(`attention equals nn.MultiheadAttention(batch_first=True): output and gradients, ${what}`, () => {
    for (const b of backends) {
      const { layer, model } = withTorchParams(b, c.causal);
      const ctx = c.lengths ? { ...TRAIN_CTX, lengths: Int32Array.from(c.lengths) } : TRAIN_CTX;
      const x = new Tensor(ref.shape, f32(ref.x));
      const y = layer.forward(x, ctx);
      assertClose(y.data, c.y, { ...TOL, what: `${b.name} output (${what})` });
      model.zeroGrads();
      const dx = layer.backward(new Tensor(ref.shape, f32(c.r)), true)!;
      assertClose(dx.data, c.dx, { ...TOL, what: `${b.name} d/dx (${what})` });
      for (const e of model.paramEntries) {
        const name = e.name.replace(/^layers\.0\./, '');
        const grad = model.grads.subarray(e.offset, e.offset + e.size);
        assertClose(grad, c.grads[name]!, { ...TOL, what: `${b.name} d/d${name} (${what})` });
      }
    }
  });
}

test("attention starts as PyTorch's: xavier_uniform in_proj_weight, nn.Linear's U(±1/√D) out_proj.weight, zero biases", () => {
  const D = 64;
  const layer = new Attention(jsBackend, 'attention', [8, D], { heads: 4, causal: true, dropout: 0 }, 0);
  const model = new Sequential(jsBackend, [layer], layer.inputShape);
  model.initialize(3);
  const values = (name: string) => {
    const e = model.paramEntries.find((p) => p.name === `layers.0.${name}`)!;
    return model.params.subarray(e.offset, e.offset + e.size);
  };
  const maxAbs = (a: Float32Array) => a.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  // bounds reached within 2% by 12,288 and 4,096 uniform draws
  const xavier = Math.sqrt(6 / (D + 3 * D)),
    linear = 1 / Math.sqrt(D);
  assert.ok(maxAbs(values('in_proj_weight')) <= xavier && maxAbs(values('in_proj_weight')) > 0.98 * xavier);
  assert.ok(maxAbs(values('out_proj.weight')) <= linear && maxAbs(values('out_proj.weight')) > 0.98 * linear);
  assert.equal(maxAbs(values('in_proj_bias')), 0);
  assert.equal(maxAbs(values('out_proj.bias')), 0);
});
