// The recurrent cells' per-step elementwise work (LSTM i, f, g, o; GRU r, z, n), SIMD over the
// units, on the time-major run buffers of src/nn/recurrentCell.ts: block t of a [T·N, ·] buffer is
// step t's N rows; the state buffers [(T+1)·N, H] have block 0 = the zero initial state, so step t
// reads block t and writes block t + 1. A sample whose length is ≤ t is padding at this step: its
// states are 0 and its pre-activation gradients 0. The js backend (src/kernels/js/recurrent.ts) is
// the reference; lanes past the last multiple of 4 use float64 Math, as it does.

import { at, zeroF32 } from './simd';
import { vsigmoid, vtanh } from './vmath';

// @ts-ignore: decorator
@inline function sig(v: f32): f32 { return <f32>(1.0 / (1.0 + Math.exp(-<f64>v))); }
// @ts-ignore: decorator
@inline function th(v: f32): f32 { return <f32>Math.tanh(<f64>v); }

// @ts-ignore: decorator
@inline function valid(lengths: usize, n: i32, t: i32): bool { return t < load<i32>(at(lengths, n)); }

/** LSTM step t: gates block t (pre-activations) → i, f, g, o; c, h block t + 1. */
export function lstmCellForward(t: i32, N: i32, H: i32, gates: usize, c: usize, h: usize, lengths: usize): void {
  const NH = N * H, G4 = 4 * H;
  for (let n = 0; n < N; n++) {
    const prev = t * NH + n * H, out = prev + NH;
    const cp = at(c, prev), co = at(c, out), ho = at(h, out);
    if (!valid(lengths, n, t)) { zeroF32(co, H); zeroF32(ho, H); continue; }
    const gi = at(gates, (t * N + n) * G4), gf = at(gi, H), gg = at(gf, H), go = at(gg, H);
    let j = 0;
    for (; j + 4 <= H; j += 4) {
      const o4 = <usize>j << 2;
      const i = vsigmoid(v128.load(gi + o4)), f = vsigmoid(v128.load(gf + o4));
      const g = vtanh(v128.load(gg + o4)), o = vsigmoid(v128.load(go + o4));
      v128.store(gi + o4, i); v128.store(gf + o4, f); v128.store(gg + o4, g); v128.store(go + o4, o);
      const cv = f32x4.add(f32x4.mul(f, v128.load(cp + o4)), f32x4.mul(i, g));
      v128.store(co + o4, cv);
      v128.store(ho + o4, f32x4.mul(o, vtanh(cv)));
    }
    for (; j < H; j++) {
      const o4 = <usize>j << 2;
      const i = sig(load<f32>(gi + o4)), f = sig(load<f32>(gf + o4)), g = th(load<f32>(gg + o4)), o = sig(load<f32>(go + o4));
      store<f32>(gi + o4, i); store<f32>(gf + o4, f); store<f32>(gg + o4, g); store<f32>(go + o4, o);
      const cv = f * load<f32>(cp + o4) + i * g;
      store<f32>(co + o4, cv);
      store<f32>(ho + o4, o * th(cv));
    }
  }
}

/** Back through LSTM step t: dh block t + 1 and dc (dL/dc of step t + 1, [N, H]) → dz block t, dc of step t. */
export function lstmCellBackward(t: i32, N: i32, H: i32, gates: usize, c: usize, dh: usize, dc: usize, dz: usize, lengths: usize): void {
  const NH = N * H, G4 = 4 * H;
  const one = f32x4.splat(1);
  for (let n = 0; n < N; n++) {
    const zb = (t * N + n) * G4;
    const dcr = at(dc, n * H);
    if (!valid(lengths, n, t)) { zeroF32(at(dz, zb), G4); zeroF32(dcr, H); continue; }
    const prev = t * NH + n * H, cur = prev + NH;
    const gi = at(gates, zb), gf = at(gi, H), gg = at(gf, H), go = at(gg, H);
    const di = at(dz, zb), df = at(di, H), dg = at(df, H), dout = at(dg, H);
    const cp = at(c, prev), cc = at(c, cur), dhr = at(dh, cur);
    let j = 0;
    for (; j + 4 <= H; j += 4) {
      const o4 = <usize>j << 2;
      const i = v128.load(gi + o4), f = v128.load(gf + o4), g = v128.load(gg + o4), o = v128.load(go + o4);
      const dhv = v128.load(dhr + o4), tc = vtanh(v128.load(cc + o4));
      const dcv = f32x4.add(v128.load(dcr + o4), f32x4.mul(f32x4.mul(dhv, o), f32x4.sub(one, f32x4.mul(tc, tc))));
      v128.store(di + o4, f32x4.mul(f32x4.mul(dcv, g), f32x4.mul(i, f32x4.sub(one, i))));
      v128.store(df + o4, f32x4.mul(f32x4.mul(dcv, v128.load(cp + o4)), f32x4.mul(f, f32x4.sub(one, f))));
      v128.store(dg + o4, f32x4.mul(f32x4.mul(dcv, i), f32x4.sub(one, f32x4.mul(g, g))));
      v128.store(dout + o4, f32x4.mul(f32x4.mul(dhv, tc), f32x4.mul(o, f32x4.sub(one, o))));
      v128.store(dcr + o4, f32x4.mul(dcv, f));
    }
    for (; j < H; j++) {
      const o4 = <usize>j << 2;
      const i = load<f32>(gi + o4), f = load<f32>(gf + o4), g = load<f32>(gg + o4), o = load<f32>(go + o4);
      const dhv = load<f32>(dhr + o4), tc = th(load<f32>(cc + o4));
      const dcv = load<f32>(dcr + o4) + dhv * o * (1 - tc * tc);
      store<f32>(di + o4, dcv * g * i * (1 - i));
      store<f32>(df + o4, dcv * load<f32>(cp + o4) * f * (1 - f));
      store<f32>(dg + o4, dcv * i * (1 - g * g));
      store<f32>(dout + o4, dhv * tc * o * (1 - o));
      store<f32>(dcr + o4, dcv * f);
    }
  }
}

/**
 * GRU step t: gates block t (input projection with b_ih) and rec [N, 3H] (W_hh·h_t, no bias) → r, z, n
 * in gates, hn block t (W_hn·h_t + b_hn, for backward), h block t + 1.
 */
export function gruCellForward(t: i32, N: i32, H: i32, gates: usize, rec: usize, bhh: usize, hn: usize, h: usize, lengths: usize): void {
  const NH = N * H, G3 = 3 * H;
  const one = f32x4.splat(1);
  const br = bhh, bz = at(bhh, H), bn = at(bz, H);
  for (let n = 0; n < N; n++) {
    const prev = t * NH + n * H, out = prev + NH;
    const ho = at(h, out);
    if (!valid(lengths, n, t)) { zeroF32(ho, H); continue; }
    const gr = at(gates, (t * N + n) * G3), gz = at(gr, H), gn = at(gz, H);
    const rr = at(rec, n * G3), rz = at(rr, H), rn = at(rz, H);
    const hp = at(h, prev), hnr = at(hn, prev);
    let j = 0;
    for (; j + 4 <= H; j += 4) {
      const o4 = <usize>j << 2;
      const r = vsigmoid(f32x4.add(f32x4.add(v128.load(gr + o4), v128.load(rr + o4)), v128.load(br + o4)));
      const z = vsigmoid(f32x4.add(f32x4.add(v128.load(gz + o4), v128.load(rz + o4)), v128.load(bz + o4)));
      const hnv = f32x4.add(v128.load(rn + o4), v128.load(bn + o4));
      const nv = vtanh(f32x4.add(v128.load(gn + o4), f32x4.mul(r, hnv)));
      v128.store(gr + o4, r); v128.store(gz + o4, z); v128.store(gn + o4, nv);
      v128.store(hnr + o4, hnv);
      v128.store(ho + o4, f32x4.add(f32x4.mul(f32x4.sub(one, z), nv), f32x4.mul(z, v128.load(hp + o4))));
    }
    for (; j < H; j++) {
      const o4 = <usize>j << 2;
      const r = sig(load<f32>(gr + o4) + load<f32>(rr + o4) + load<f32>(br + o4));
      const z = sig(load<f32>(gz + o4) + load<f32>(rz + o4) + load<f32>(bz + o4));
      const hnv = load<f32>(rn + o4) + load<f32>(bn + o4);
      const nv = th(load<f32>(gn + o4) + r * hnv);
      store<f32>(gr + o4, r); store<f32>(gz + o4, z); store<f32>(gn + o4, nv);
      store<f32>(hnr + o4, hnv);
      store<f32>(ho + o4, (1 - z) * nv + z * load<f32>(hp + o4));
    }
  }
}

/**
 * Back through GRU step t: dh block t + 1 → dzx, dzh block t (pre-activation gradients of the input
 * and recurrent projections); adds z ⊙ dh to dh block t (the direct path to the previous state).
 */
export function gruCellBackward(t: i32, N: i32, H: i32, gates: usize, hn: usize, h: usize, dh: usize, dzx: usize, dzh: usize, lengths: usize): void {
  const NH = N * H, G3 = 3 * H;
  const one = f32x4.splat(1);
  for (let n = 0; n < N; n++) {
    const zb = (t * N + n) * G3;
    if (!valid(lengths, n, t)) { zeroF32(at(dzx, zb), G3); zeroF32(at(dzh, zb), G3); continue; }
    const prev = t * NH + n * H, cur = prev + NH;
    const gr = at(gates, zb), gz = at(gr, H), gn = at(gz, H);
    const xr = at(dzx, zb), xz = at(xr, H), xn = at(xz, H);
    const hr = at(dzh, zb), hz = at(hr, H), hnn = at(hz, H);
    const dhc = at(dh, cur), dhp = at(dh, prev), hp = at(h, prev), hnr = at(hn, prev);
    let j = 0;
    for (; j + 4 <= H; j += 4) {
      const o4 = <usize>j << 2;
      const r = v128.load(gr + o4), z = v128.load(gz + o4), nv = v128.load(gn + o4);
      const dhv = v128.load(dhc + o4);
      const dan = f32x4.mul(f32x4.mul(dhv, f32x4.sub(one, z)), f32x4.sub(one, f32x4.mul(nv, nv)));
      const dar = f32x4.mul(f32x4.mul(dan, v128.load(hnr + o4)), f32x4.mul(r, f32x4.sub(one, r)));
      const daz = f32x4.mul(f32x4.mul(dhv, f32x4.sub(v128.load(hp + o4), nv)), f32x4.mul(z, f32x4.sub(one, z)));
      v128.store(xr + o4, dar); v128.store(xz + o4, daz); v128.store(xn + o4, dan);
      v128.store(hr + o4, dar); v128.store(hz + o4, daz); v128.store(hnn + o4, f32x4.mul(dan, r));
      v128.store(dhp + o4, f32x4.add(v128.load(dhp + o4), f32x4.mul(dhv, z)));
    }
    for (; j < H; j++) {
      const o4 = <usize>j << 2;
      const r = load<f32>(gr + o4), z = load<f32>(gz + o4), nv = load<f32>(gn + o4);
      const dhv = load<f32>(dhc + o4);
      const dan = dhv * (1 - z) * (1 - nv * nv);
      const dar = dan * load<f32>(hnr + o4) * r * (1 - r);
      const daz = dhv * (load<f32>(hp + o4) - nv) * z * (1 - z);
      store<f32>(xr + o4, dar); store<f32>(xz + o4, daz); store<f32>(xn + o4, dan);
      store<f32>(hr + o4, dar); store<f32>(hz + o4, daz); store<f32>(hnn + o4, dan * r);
      store<f32>(dhp + o4, load<f32>(dhp + o4) + dhv * z);
    }
  }
}
