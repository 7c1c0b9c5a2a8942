// Max and average pooling, NHWC. Channels are processed four at a time with SIMD when C % 4 == 0.
// Only in-bounds window cells are visited, so padding never wins a max and is excluded from the
// average's count. A window with no in-bounds cell yields 0 (argmax −1, ignored by the backward).

import { at, zeroF32 } from './simd';

export function maxPoolForward(x: usize, y: usize, argmax: usize,
                               N: i32, H: i32, W: i32, C: i32, KH: i32, KW: i32,
                               sh: i32, sw: i32, pt: i32, pl: i32, OH: i32, OW: i32): void {
  const lane = i32x4(0, 1, 2, 3);
  const cv = C & ~3;
  let o = 0; // flat output index of (n, oh, ow, 0)
  for (let n = 0; n < N; n++) {
    for (let oh = 0; oh < OH; oh++) {
      const h0 = max(0, oh * sh - pt), h1 = min(H, oh * sh - pt + KH);
      for (let ow = 0; ow < OW; ow++) {
        const w0 = max(0, ow * sw - pl), w1 = min(W, ow * sw - pl + KW);
        const empty = h0 >= h1 || w0 >= w1;
        const first = ((n * H + h0) * W + w0) * C;
        let c = 0;
        if (!empty) {
          for (; c < cv; c += 4) {
            let best = v128.load(at(x, first + c));
            let bi = i32x4.add(i32x4.splat(first + c), lane);
            for (let h = h0; h < h1; h++) {
              for (let w = h == h0 ? w0 + 1 : w0; w < w1; w++) {
                const idx = ((n * H + h) * W + w) * C + c;
                const v = v128.load(at(x, idx));
                const m = v128.or(f32x4.gt(v, best), f32x4.ne(v, v));
                best = v128.bitselect(v, best, m);
                bi = v128.bitselect(i32x4.add(i32x4.splat(idx), lane), bi, m);
              }
            }
            v128.store(at(y, o + c), best);
            v128.store(at(argmax, o + c), bi);
          }
          for (; c < C; c++) {
            let bi = first + c;
            let best = load<f32>(at(x, bi));
            for (let h = h0; h < h1; h++) {
              for (let w = h == h0 ? w0 + 1 : w0; w < w1; w++) {
                const idx = ((n * H + h) * W + w) * C + c;
                const v = load<f32>(at(x, idx));
                if (v > best || v != v) { best = v; bi = idx; }
              }
            }
            store<f32>(at(y, o + c), best);
            store<i32>(at(argmax, o + c), bi);
          }
        } else {
          for (; c < C; c++) { store<f32>(at(y, o + c), 0); store<i32>(at(argmax, o + c), -1); }
        }
        o += C;
      }
    }
  }
}

export function maxPoolBackward(dy: usize, argmax: usize, dx: usize, outLen: i32, inLen: i32): void {
  zeroF32(dx, inLen);
  for (let i = 0; i < outLen; i++) {
    const j = load<i32>(at(argmax, i));
    if (j >= 0 && j < inLen) store<f32>(at(dx, j), load<f32>(at(dx, j)) + load<f32>(at(dy, i)));
  }
}

export function avgPoolForward(x: usize, y: usize,
                               N: i32, H: i32, W: i32, C: i32, KH: i32, KW: i32,
                               sh: i32, sw: i32, pt: i32, pl: i32, OH: i32, OW: i32): void {
  const cv = C & ~3;
  let o = 0;
  for (let n = 0; n < N; n++) {
    for (let oh = 0; oh < OH; oh++) {
      const h0 = max(0, oh * sh - pt), h1 = min(H, oh * sh - pt + KH);
      for (let ow = 0; ow < OW; ow++) {
        const w0 = max(0, ow * sw - pl), w1 = min(W, ow * sw - pl + KW);
        const count = max(0, h1 - h0) * max(0, w1 - w0);
        const inv: f32 = count > 0 ? <f32>1 / <f32>count : 0;
        const vinv = f32x4.splat(inv);
        let c = 0;
        for (; c < cv; c += 4) {
          let s = f32x4.splat(0);
          for (let h = h0; h < h1; h++)
            for (let w = w0; w < w1; w++) s = f32x4.add(s, v128.load(at(x, ((n * H + h) * W + w) * C + c)));
          v128.store(at(y, o + c), f32x4.mul(s, vinv));
        }
        for (; c < C; c++) {
          let s: f32 = 0;
          for (let h = h0; h < h1; h++)
            for (let w = w0; w < w1; w++) s += load<f32>(at(x, ((n * H + h) * W + w) * C + c));
          store<f32>(at(y, o + c), s * inv);
        }
        o += C;
      }
    }
  }
}

export function avgPoolBackward(dy: usize, dx: usize,
                                N: i32, H: i32, W: i32, C: i32, KH: i32, KW: i32,
                                sh: i32, sw: i32, pt: i32, pl: i32, OH: i32, OW: i32): void {
  zeroF32(dx, N * H * W * C);
  const cv = C & ~3;
  let o = 0;
  for (let n = 0; n < N; n++) {
    for (let oh = 0; oh < OH; oh++) {
      const h0 = max(0, oh * sh - pt), h1 = min(H, oh * sh - pt + KH);
      for (let ow = 0; ow < OW; ow++) {
        const w0 = max(0, ow * sw - pl), w1 = min(W, ow * sw - pl + KW);
        const count = max(0, h1 - h0) * max(0, w1 - w0);
        const inv: f32 = count > 0 ? <f32>1 / <f32>count : 0;
        const vinv = f32x4.splat(inv);
        let c = 0;
        for (; c < cv; c += 4) {
          const g = f32x4.mul(v128.load(at(dy, o + c)), vinv);
          for (let h = h0; h < h1; h++)
            for (let w = w0; w < w1; w++) {
              const p = at(dx, ((n * H + h) * W + w) * C + c);
              v128.store(p, f32x4.add(v128.load(p), g));
            }
        }
        for (; c < C; c++) {
          const g = load<f32>(at(dy, o + c)) * inv;
          for (let h = h0; h < h1; h++)
            for (let w = w0; w < w1; w++) {
              const p = at(dx, ((n * H + h) * W + w) * C + c);
              store<f32>(p, load<f32>(p) + g);
            }
        }
        o += C;
      }
    }
  }
}
