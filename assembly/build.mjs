// Builds build/kernels.wasm (SIMD128) and build/kernels-relaxed.wasm (relaxed SIMD) with asc.
// `--if-stale`: skip when both files exist and are newer than every source in assembly/.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = dirname(here);
const outputs = ['kernels.wasm', 'kernels-relaxed.wasm'].map((f) => join(root, 'build', f));

if (process.argv.includes('--if-stale') && outputs.every(existsSync)) {
  const built = Math.min(...outputs.map((f) => statSync(f).mtimeMs));
  const newest = Math.max(...readdirSync(here).map((f) => statSync(join(here, f)).mtimeMs));
  if (newest <= built) process.exit(0);
}

const asc = join(root, 'node_modules', 'assemblyscript', 'bin', 'asc.js');
if (!existsSync(asc)) {
  console.error('build:wasm: AssemblyScript is not installed (run `npm ci`); the wasm backend will be unavailable.');
  process.exit(1);
}
for (const target of ['simd', 'relaxed']) {
  execFileSync(process.execPath, [asc, '--config', join(here, 'asconfig.json'), '--target', target], { cwd: root, stdio: 'inherit' });
}
