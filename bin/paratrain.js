#!/usr/bin/env node
// The installed command runs the compiled CLI (built by `npm run build`, which `npm ci` runs).
import { existsSync } from 'node:fs';
const main = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(main)) {
  console.error('paratrain: the CLI is not built yet; run `npm run build` (npm ci does it) in the paratrain folder');
  process.exit(1);
}
await import(main.href);
