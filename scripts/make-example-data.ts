/**
 * Builds the data of the two "your own data" examples, deterministically (Philox, fixed seeds):
 *
 * - examples/data/spirals/{train,test}.csv for examples/tabular.yaml: three interleaved spiral arms
 *   in the plane (the classic "three spirals" toy problem), columns x, y, arm (amber, blue, crimson);
 *   400 training and 100 test rows per arm, with a little noise.
 * - examples/data/shapes/{train,test}/<class>/*.png for examples/image-folder.yaml: 24×24 RGB images
 *   of a circle, a square or a triangle of random size, place and colour on a noisy background;
 *   100 training and 25 test images per class.
 *
 *   node --import tsx scripts/make-example-data.ts
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PNG } from 'pngjs';
import { CounterRng } from '../src/tensor/rng.ts';

const examples = fileURLToPath(new URL('../examples/data/', import.meta.url));

function spirals(): void {
  const arms = ['amber', 'blue', 'crimson'];
  const dir = join(examples, 'spirals');
  mkdirSync(dir, { recursive: true });
  for (const [split, perArm, seed] of [
    ['train', 400, 1],
    ['test', 100, 2],
  ] as const) {
    const rng = new CounterRng(seed, 0x5b1);
    const rows = ['x,y,arm'];
    for (let i = 0; i < perArm; i++) {
      arms.forEach((arm, k) => {
        const t = rng.next();
        // radius grows along the arm; the three arms are turned by a third of a circle each
        const angle = t * 3 * Math.PI + (2 * Math.PI * k) / 3 + rng.normal() * 0.5;
        const r = 0.1 + t;
        rows.push(`${(r * Math.cos(angle)).toFixed(4)},${(r * Math.sin(angle)).toFixed(4)},${arm}`);
      });
    }
    writeFileSync(join(dir, `${split}.csv`), `${rows.join('\n')}\n`);
  }
}

/** Whether pixel (x, y) lies inside the shape centred at (cx, cy) of half-size s. */
const inside: Record<string, (x: number, y: number, cx: number, cy: number, s: number) => boolean> = {
  circle: (x, y, cx, cy, s) => (x - cx) ** 2 + (y - cy) ** 2 <= s * s,
  square: (x, y, cx, cy, s) => Math.abs(x - cx) <= s * 0.85 && Math.abs(y - cy) <= s * 0.85,
  // pointing up: the base at cy + s, the apex at cy − s
  triangle: (x, y, cx, cy, s) => y <= cy + s && y >= cy - s && Math.abs(x - cx) <= (y - (cy - s)) / 2,
};

function shapes(): void {
  const size = 24;
  const root = join(examples, 'shapes');
  rmSync(root, { recursive: true, force: true });
  for (const [split, perClass, seed] of [
    ['train', 100, 3],
    ['test', 25, 4],
  ] as const) {
    Object.keys(inside).forEach((shape, k) => {
      const dir = join(root, split, shape);
      mkdirSync(dir, { recursive: true });
      for (let i = 0; i < perClass; i++) {
        const rng = new CounterRng(seed, k, i);
        const s = 4 + rng.next() * 5,
          cx = s + rng.next() * (size - 2 * s),
          cy = s + rng.next() * (size - 2 * s);
        const colour = [rng.int(200) + 55, rng.int(200) + 55, rng.int(200) + 55];
        const png = new PNG({ width: size, height: size });
        for (let y = 0; y < size; y++) {
          for (let x = 0; x < size; x++) {
            const o = 4 * (y * size + x),
              on = inside[shape]!(x + 0.5, y + 0.5, cx, cy, s);
            for (let c = 0; c < 3; c++) png.data[o + c] = on ? colour[c]! : rng.int(60);
            png.data[o + 3] = 255;
          }
        }
        writeFileSync(join(dir, `${String(i).padStart(3, '0')}.png`), PNG.sync.write(png));
      }
    });
  }
}

spirals();
shapes();
process.stdout.write(`wrote ${join(examples, 'spirals')} and ${join(examples, 'shapes')}\n`);
