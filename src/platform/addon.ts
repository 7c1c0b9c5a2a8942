/**
 * Finding and loading paratrain's optional native addons (the OpenBLAS and oneDNN kernels, the
 * MPI transport, the tcp data path, the shm reduction, the benchmarks' FMA probe): one loader for all.
 *
 * An addon is found relative to the repository root — src/platform/ and dist/platform/ both sit
 * two levels below it — in build/native/ (where `npm run build:*` puts it) or in the hand-built
 * native/…/build/Release/ of a `node-gyp rebuild`. Loading never throws: a disabling environment
 * variable, a missing file, a missing shared library, an ABI mismatch or a missing export give
 * null, and the reason is recorded. Each addon is loaded at most once per thread.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

export interface AddonSpec {
  /** the file name, e.g. 'paratrain_mpi.node' */
  file: string;
  /** the folder of its sources, relative to the repository root (its hand build is in build/Release/ there) */
  sourceDir: string;
  /** the environment variable that disables it when set to '0', e.g. 'PARATRAIN_MPI' */
  disableEnv: string;
  /** functions it must export; a build without them is stale */
  requiredExports: readonly string[];
  /** the command that builds it, for messages, e.g. 'npm run build:mpi' */
  buildCommand: string;
  /** the reason recorded when no file is built */
  notBuiltReason: string;
  /** the reason recorded when the file does not load (default: '<path> does not load: <message>') */
  loadFailureReason?: (path: string, message: string) => string;
  /** dlopen flags (os.constants.dlopen), e.g. RTLD_GLOBAL for libraries that dlopen plugins; default: Node's require */
  dlopenFlags?: number;
  /** environment variables set while it loads, where they are unset (read by library constructors), then removed */
  loadEnv?: Record<string, string>;
}

interface Outcome {
  addon: unknown;
  reason?: string;
}

const outcomes = new Map<string, Outcome>();

/** Absolute path of the addon file that would be loaded, or null when none is built. */
export function addonPath(spec: Pick<AddonSpec, 'file' | 'sourceDir'>): string | null {
  for (const rel of [`../../build/native/${spec.file}`, `../../${spec.sourceDir}/build/Release/${spec.file}`]) {
    const path = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(path)) return path;
  }
  return null;
}

/** The addon's exports, or null when it is disabled, not built or does not load here (see addonUnavailableReason). */
export function loadAddon<T>(spec: AddonSpec): T | null {
  let outcome = outcomes.get(spec.file);
  if (!outcome) {
    outcome = tryLoad(spec);
    outcomes.set(spec.file, outcome);
  }
  return outcome.addon as T | null;
}

/** Why loadAddon(spec) returned null (undefined when it loaded or was not tried). */
export function addonUnavailableReason(spec: Pick<AddonSpec, 'file'>): string | undefined {
  return outcomes.get(spec.file)?.reason;
}

function tryLoad(spec: AddonSpec): Outcome {
  if (process.env[spec.disableEnv] === '0') return { addon: null, reason: `disabled by ${spec.disableEnv}=0` };
  const path = addonPath(spec);
  if (!path) return { addon: null, reason: spec.notBuiltReason };
  const setEnv = Object.keys(spec.loadEnv ?? {}).filter((k) => process.env[k] === undefined);
  for (const k of setEnv) process.env[k] = spec.loadEnv![k];
  try {
    let exports: Record<string, unknown>;
    if (spec.dlopenFlags === undefined) {
      exports = createRequire(import.meta.url)(path) as Record<string, unknown>;
    } else {
      const module = { exports: {} as Record<string, unknown> };
      process.dlopen(module, path, spec.dlopenFlags);
      exports = module.exports;
    }
    const missing = spec.requiredExports.find((name) => typeof exports[name] !== 'function');
    if (missing) throw new Error(`it does not export ${missing} (stale build? run ${spec.buildCommand})`);
    return { addon: exports };
  } catch (err) {
    const message = (err as Error).message.split('\n')[0]!;
    return {
      addon: null,
      reason: spec.loadFailureReason ? spec.loadFailureReason(path, message) : `${path} does not load: ${message}`,
    };
  } finally {
    for (const k of setEnv) delete process.env[k];
  }
}
