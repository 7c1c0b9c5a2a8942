/**
 * Side-by-side figures from PyTorch where Debian's python3-torch is installed (never a dependency):
 * finds a python with torch and runs a script under it.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let cached: string | null | undefined;

/** A python3 that can import torch (Debian's is /usr/bin/python3), or null. */
export function torchPython(): string | null {
  if (cached !== undefined) return cached;
  cached = null;
  for (const python of ['/usr/bin/python3', 'python3']) {
    const r = spawnSync(python, ['-c', 'import torch'], { encoding: 'utf8' });
    if (r.status === 0) {
      cached = python;
      break;
    }
  }
  return cached;
}

/** Runs a python script with args; returns its stdout, or throws with its stderr. */
export function runPython(script: string, args: string[], env: Record<string, string> = {}): string {
  const python = torchPython();
  if (!python) throw new Error('python3-torch is not installed');
  // a file, not `-c`: multiprocessing's spawn start method re-imports the main module
  const dir = mkdtempSync(join(tmpdir(), 'paratrain-torch-'));
  const file = join(dir, 'bench.py');
  writeFileSync(file, script);
  try {
    const r = spawnSync(python, [file, ...args], {
      encoding: 'utf8',
      env: { ...process.env, OMP_NUM_THREADS: '1', MKL_NUM_THREADS: '1', ...env },
      timeout: 600_000,
    });
    if (r.status !== 0) throw new Error(`python failed: ${r.stderr.trim().split('\n').slice(-3).join(' | ')}`);
    return r.stdout.trim();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The mnist-small network in PyTorch (same layers as examples/mnist-small.yaml). */
export const TORCH_NET = `
import torch, torch.nn as nn
def make_net():
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(1600, 128), nn.ReLU(), nn.Dropout(0.25), nn.Linear(128, 10))
`;

/** The resnet-small network in PyTorch (same layers as examples/resnet-small.yaml), as make_net. */
export const TORCH_RESNET_SMALL = `
import torch, torch.nn as nn
class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                                  nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.shortcut = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                         if stride != 1 or cin != cout else nn.Identity())
    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))
def make_net():
    return nn.Sequential(nn.Conv2d(1, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         Block(8, 8, 1), Block(8, 16, 2), Block(16, 16, 1), nn.AvgPool2d(7), nn.Flatten(), nn.Linear(16, 10))
`;

/** The PyTorch twin of an example's network (defining make_net), where there is one. */
export function torchNetOf(example: string): string | null {
  return example === 'mnist-small' ? TORCH_NET : example === 'resnet-small' ? TORCH_RESNET_SMALL : null;
}
