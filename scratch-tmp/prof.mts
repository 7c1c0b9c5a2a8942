import { measureModelCosts } from '../src/simulate/profile.ts';
import { loadConfig } from '../src/index.ts';
const cfg = loadConfig('/work/main/examples/mnist-small.yaml');
for (const backend of process.argv.slice(2)) {
  const c = await measureModelCosts({ model: cfg.model, optimizer: cfg.optimizer, backend, batches: [64], repetitions: 15, cacheDir: null });
  let tf = 0, tb = 0;
  for (const l of c.layers) {
    const f = l.forward.perSample * 64 * 1e3 + l.forward.fixed * 1e3, b = l.backward.perSample * 64 * 1e3 + l.backward.fixed * 1e3;
    tf += f; tb += b;
    console.log(backend.padEnd(8), l.name.padEnd(28), f.toFixed(3).padStart(8), b.toFixed(3).padStart(8));
  }
  console.log(backend, 'total fwd', tf.toFixed(2), 'bwd', tb.toFixed(2), 'ms per batch of 64');
}
