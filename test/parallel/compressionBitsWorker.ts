/** One shm rank of compression-onebit.test.ts: the raw words and the exchange (compressionBits.ts), posted back. */
import { parentPort, workerData } from 'node:worker_threads';
import { ShmCommunicator, type ShmInit } from '../../src/comm/shm/index.ts';
import { exchangeSteps, rawWords } from './compressionBits.ts';

const comm = await ShmCommunicator.connect((workerData as { init: ShmInit }).init);
const raw = await rawWords(comm);
const steps = await exchangeSteps(comm);
parentPort!.postMessage({ raw, steps });
