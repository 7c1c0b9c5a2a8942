// Backend.copyRows (src/kernels/js/rows.ts is the definition; its JS wrapper checks every row's bounds).

/**
 * For i < count: `width` floats at to + 4·toStarts[i] set to (with `add`: incremented by) those at
 * from + 4·fromStarts[i]; a from-start of −1 sets zeros (adds nothing). Byte addresses; the starts
 * are i32 arrays.
 */
export function copyRows(from: usize, fromStarts: usize, to: usize, toStarts: usize, count: i32, width: i32, add: bool): void {
  const bytes = <usize>width << 2;
  for (let i = 0; i < count; i++) {
    const f = load<i32>(fromStarts + (<usize>i << 2));
    const t = to + (<usize>load<i32>(toStarts + (<usize>i << 2)) << 2);
    if (f < 0) {
      if (!add) memory.fill(t, 0, bytes);
      continue;
    }
    const s = from + (<usize>f << 2);
    if (!add) {
      memory.copy(t, s, bytes);
      continue;
    }
    let j: usize = 0;
    for (; j + 16 <= bytes; j += 16) v128.store(t + j, f32x4.add(v128.load(t + j), v128.load(s + j)));
    for (; j < bytes; j += 4) store<f32>(t + j, load<f32>(t + j) + load<f32>(s + j));
  }
}
