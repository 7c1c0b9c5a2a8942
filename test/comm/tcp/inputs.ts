/** Deterministic test inputs shared by the tcp worker processes and the tests. */

/** Rank `rank`'s element i for test `seed`: a value in [-1, 1] with 3 decimals. */
export function inputValue(rank: number, i: number, seed: number): number {
  const h = (Math.imul(i + 1, 2654435761) ^ Math.imul(rank + 1, 40503) ^ Math.imul(seed + 7, 97)) >>> 0;
  return ((h % 2001) - 1000) / 1000;
}

/** The serial float32 reference: sum over ranks 0…N−1 in order, rounding after every add. */
export function serialSum(N: number, n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let acc = Math.fround(inputValue(0, i, seed));
    for (let r = 1; r < N; r++) acc = Math.fround(acc + Math.fround(inputValue(r, i, seed)));
    out[i] = acc;
  }
  return out;
}
