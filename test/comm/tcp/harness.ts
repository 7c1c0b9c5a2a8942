/**
 * Runs a tcp test job: one child process per rank (worker.ts, bundled once per test process), rank 0 first
 * on a free rendezvous port (it reports the port), then the others pointed at it.
 */
import { fork, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { bundledModule } from '../../../src/runtime/job/spawnWorker.ts';
import type { TcpConnectOptions } from '../../../src/comm/tcp/index.ts';

export const SECRET = 'test-secret-0123456789abcdef';

type JsonOptions = Omit<TcpConnectOptions, 'rank' | 'worldSize' | 'log' | 'onMasterListening' | 'onFailure' | 'env'>;

export interface WorkerSpec {
  rank: number;
  worldSize: number;
  masterPort: number;
  scenario: string;
  options: JsonOptions;
  params: Record<string, unknown>;
  waitForGo?: boolean;
}

export interface RankResult {
  rank: number;
  ok: boolean;
  failures: string[];
  data: Record<string, unknown>;
  logs: string[];
  elapsedMs: number;
  error?: { name: string; message: string; missing?: number[]; rank?: number; failedRank?: number };
  exitCode?: number | null;
}

export type WorkerMessage =
  | { type: 'listening'; port: number }
  | { type: 'ready'; address: { host: string; port: number }; rank: number }
  | { type: 'result'; result: RankResult };

const workerPath = fileURLToPath(new URL('./worker.ts', import.meta.url));

export interface JobOptions {
  worldSize: number;
  /** which ranks to start (default all) */
  ranks?: number[];
  scenario: string;
  /** per-rank connect options (secret defaults to SECRET) */
  options?: (rank: number) => JsonOptions;
  params?: Record<string, unknown>;
  /** when rank 0 is not started: the port the others dial */
  masterPort?: number;
  /** after rank 0 listens, before the others start */
  onListening?: (port: number) => Promise<void> | void;
  /** once every started rank has connected; the ranks then wait for it before their scenario */
  onReady?: (addresses: Map<number, { host: string; port: number }>) => Promise<void> | void;
  /** kill any process still running after this long */
  killAfterMs?: number;
  /**
   * A rank that stops itself (SIGSTOP) and so never exits: it is killed as soon as every other rank
   * has exited, so a loaded machine's slow starts can have a long killAfterMs without every run waiting it out.
   */
  stalledRank?: number;
}

/** A TCP port that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

export async function runJob(o: JobOptions): Promise<RankResult[]> {
  const ranks = o.ranks ?? Array.from({ length: o.worldSize }, (_, r) => r);
  const children: ChildProcess[] = [];
  const addresses = new Map<number, { host: string; port: number }>();
  let readyHook: Promise<void> | undefined;
  let listeningPort: ((port: number) => void) | undefined;
  const exited = new Set<number>();
  let stalledChild: ChildProcess | undefined;

  const start = (rank: number, masterPort: number): Promise<RankResult> =>
    new Promise((resolve) => {
      const spec: WorkerSpec = {
        rank,
        worldSize: o.worldSize,
        masterPort,
        scenario: o.scenario,
        options: { secret: SECRET, ...(o.options?.(rank) ?? {}) },
        params: o.params ?? {},
        waitForGo: !!o.onReady,
      };
      // one bundle of worker.ts per test process: each rank starts without loading tsx (spawnWorker.ts)
      const bundle = bundledModule(pathToFileURL(workerPath).href);
      const child = fork(bundle ? fileURLToPath(bundle) : workerPath, [JSON.stringify(spec)], {
        execArgv: bundle ? ['--enable-source-maps'] : ['--import', 'tsx'],
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      children.push(child);
      if (rank === o.stalledRank) stalledChild = child;
      let result: RankResult | undefined;
      const kill = setTimeout(() => child.kill('SIGKILL'), o.killAfterMs ?? 45_000);
      child.on('message', (m: WorkerMessage) => {
        if (m.type === 'listening') listeningPort?.(m.port);
        else if (m.type === 'ready') {
          addresses.set(m.rank, m.address);
          if (o.onReady && addresses.size === ranks.length) {
            readyHook = Promise.resolve(o.onReady(addresses)).then(() => {
              for (const c of children) if (c.connected) c.send({ type: 'go' });
            });
          }
        } else if (m.type === 'result') result = m.result;
      });
      child.on('exit', (code, signal) => {
        clearTimeout(kill);
        exited.add(rank);
        if (o.stalledRank !== undefined && exited.size === ranks.length - 1 && !exited.has(o.stalledRank)) {
          stalledChild?.kill('SIGKILL');
        }
        listeningPort?.(-1);
        resolve(
          result
            ? { ...result, exitCode: code }
            : {
                rank,
                ok: false,
                failures: [],
                data: {},
                logs: [],
                elapsedMs: -1,
                exitCode: code,
                error: {
                  name: 'NoResult',
                  message: `rank ${rank} exited (code ${code}, signal ${signal}) without a result`,
                },
              },
        );
      });
    });

  const done: Promise<RankResult>[] = [];
  let masterPort = o.masterPort ?? 0;
  if (ranks.includes(0)) {
    const port = new Promise<number>((resolve) => {
      listeningPort = resolve;
    });
    done.push(start(0, 0));
    masterPort = await port;
    listeningPort = undefined;
    if (masterPort > 0) await o.onListening?.(masterPort);
  }
  if (masterPort > 0) for (const r of ranks) if (r !== 0) done.push(start(r, masterPort));
  const results = await Promise.all(done);
  await readyHook;
  return results.sort((a, b) => a.rank - b.rank);
}

/** A readable summary for assertion messages. */
export function describe(results: RankResult[]): string {
  return results
    .map(
      (r) =>
        `rank ${r.rank}: ${r.ok ? 'ok' : r.error ? `${r.error.name}: ${r.error.message}` : r.failures.join('; ')}` +
        (r.logs.length ? `\n    logs: ${r.logs.join('\n          ')}` : ''),
    )
    .join('\n');
}
