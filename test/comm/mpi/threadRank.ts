/** The worker-thread side of rank.ts: MPI is initialised and used from this thread only. */
import { parentPort } from 'node:worker_threads';
import { runRank } from './runRank.ts';

const handshake = () =>
  new Promise<void>((resolve) => {
    parentPort!.once('message', () => resolve());
    parentPort!.postMessage({ type: 'initialised' });
  });
parentPort!.postMessage({ type: 'result', result: await runRank('worker', handshake) });
