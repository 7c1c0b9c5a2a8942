import { TcpCommunicator } from '../../comm/tcp/index.ts';
import { getBackend } from '../../kernels/index.ts';
import { hostBackend } from '../../kernels/hostBackend.ts';
import { createOptimizer } from '../../optim/optimizer.ts';
import { serveParameterServer, type ServeOptions } from '../../parallel/parameterServer/host.ts';
import type { ParameterServerStart } from '../../parallel/parameterServer/index.ts';
import { tcpOptionsOf, type TcpWorldSpec } from './processWorld.ts';
import type { RunConfig } from '../../config/runConfig.ts';

/** The server's work over a run: pushes handled and the median seconds of one (the 'serverWork' metrics event). */
export interface ServerWork {
  pushes: number;
  medianPushSeconds: number;
}

/**
 * The parameter server of a multi-process job, in process 0's main thread: the weights and the
 * optimizer live here (a resumed job's as its checkpoint set saved them) and every device, in whatever process, pushes and pulls over TCP. Resolves
 * once every device has said goodbye (or, with world.dropsLostDevices, was lost: see ServeOptions), with the work it did.
 */
export async function hostParameterServer(
  config: RunConfig,
  start: ParameterServerStart,
  world: TcpWorldSpec,
  onDeviceLost?: ServeOptions['onDeviceLost'],
): Promise<ServerWork> {
  // the server's update acts on host arrays it sends and receives: a GPU backend's host twin
  const backend = hostBackend(await getBackend(config.train.backend));
  const comm = await TcpCommunicator.connect(tcpOptionsOf(world));
  try {
    const params = backend.alloc(start.params.length);
    params.set(start.params);
    const optimizer = createOptimizer(backend, config.optimizer, params.length, undefined, start.frozen);
    // a resumed server carries on: its optimizer slots and its update count (Adam's step) as saved
    if (start.optimizer) optimizer.loadState(start.optimizer);
    const pushes: number[] = [];
    await serveParameterServer(comm, params, optimizer, {
      survivesLostDevices: world.dropsLostDevices === true,
      onDeviceLost,
      version: start.version,
      describe: (words, awaiting) => comm.describeWhereabouts(words, awaiting),
      onUpdate: (s) => pushes.push(s),
      // the devices' waits for data time out after world.timeoutMs (their receive timeout)
      keepAliveMs: world.timeoutMs / 2,
    });
    pushes.sort((a, b) => a - b);
    return { pushes: pushes.length, medianPushSeconds: pushes.length ? pushes[pushes.length >> 1]! : NaN };
  } catch (err) {
    comm.abort(`the parameter server failed: ${(err as Error).message}`);
    throw err;
  } finally {
    await comm.close();
  }
}
