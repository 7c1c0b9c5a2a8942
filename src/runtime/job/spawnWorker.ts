import { Worker } from 'node:worker_threads';

/**
 * Starts a worker thread on a module next to the caller, given by its URL without extension. From
 * compiled JavaScript that is plain; from TypeScript sources (tests, tsx) the worker must register
 * tsx itself, because tsx's --import hooks do not reach worker threads on Node 20 (tsx#354).
 */
export function spawnModuleWorker(callerUrl: string, relativeStem: string, workerData: unknown): Worker {
  const isTs = callerUrl.endsWith('.ts');
  const entry = new URL(`${relativeStem}.${isTs ? 'ts' : 'js'}`, callerUrl);
  if (!isTs) return new Worker(entry, { workerData });
  const code = `import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(entry.href)}); })`;
  return new Worker(code, { eval: true, workerData });
}
