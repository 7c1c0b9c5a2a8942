import type { Communicator } from '../../comm/communicator.ts';
import type { ParameterServer, ParameterServerSnapshot, ParameterServerStats } from './index.ts';
import { PsHeader, PsOp, PsTag, STILL_WAITING } from './protocol.ts';

/**
 * A device's handle on a parameter server in another process (see protocol.ts):
 * the same calls as the shared-memory server, each a request to rank 0 of `comm`. Calls from one
 * device are sequential, so requests and replies pair up in order.
 */
export class RemoteParameterServer implements ParameterServer {
  private readonly request = new PsHeader();
  private readonly reply = new PsHeader();
  private stats: ParameterServerStats = { commMs: 0, idleMs: 0, bytes: 0 };
  private step = 0;

  constructor(private readonly comm: Communicator) {}

  takeStats(): ParameterServerStats {
    const s = this.stats;
    this.stats = { commMs: 0, idleMs: 0, bytes: 0 };
    return s;
  }

  private async timed<T>(bytes: number, fn: () => Promise<T>, idle = false): Promise<T> {
    const t0 = performance.now();
    try {
      return await fn();
    } finally {
      const ms = performance.now() - t0;
      this.stats.commMs += ms;
      if (idle) this.stats.idleMs += ms;
      this.stats.bytes += bytes;
    }
  }

  private send(op: PsOp, a = 0, b = 0, c = 0): Promise<void> {
    return this.comm.send(this.request.set(op, a, b, c, this.step).wire, 0, PsTag.Request);
  }

  private async answer(): Promise<Float64Array> {
    await this.comm.recv(this.reply.wire, 0, PsTag.Reply);
    return this.reply.values;
  }

  /** The reply that ends a wait, past the server's keep-alives. */
  private async awaitEnd(): Promise<void> {
    while ((await this.answer())[0] === STILL_WAITING) {
      /* the others are not there yet */
    }
  }

  pull(into: Float32Array): Promise<number> {
    return this.timed(into.byteLength, async () => {
      await this.send(PsOp.Pull);
      const version = (await this.answer())[0]!;
      await this.comm.recv(into, 0, PsTag.Data);
      return version;
    });
  }

  push(
    grads: Float32Array,
    computedAt: number,
    lr: number,
    maxStaleness?: number,
  ): Promise<{ staleness: number; applied: boolean }> {
    return this.timed(grads.byteLength, async () => {
      await this.send(PsOp.Push, computedAt, lr, maxStaleness ?? -1);
      await this.comm.send(grads, 0, PsTag.Data);
      const r = await this.answer();
      return { staleness: r[0]!, applied: r[1] === 1 };
    });
  }

  elasticExchange(x: Float32Array, alpha: number): Promise<void> {
    return this.timed(2 * x.byteLength, async () => {
      await this.send(PsOp.Elastic, alpha);
      await this.comm.send(x, 0, PsTag.Data);
      await this.comm.recv(x, 0, PsTag.Data);
    });
  }

  waitTurn(rank: number, size: number): Promise<void> {
    return this.timed(
      0,
      async () => {
        await this.send(PsOp.WaitTurn, rank, size);
        await this.awaitEnd();
      },
      true,
    );
  }

  passTurn(): Promise<void> {
    return this.timed(0, () => this.send(PsOp.PassTurn));
  }

  atStep(step: number): void {
    this.step = step;
  }

  finish(): Promise<void> {
    return this.timed(
      0,
      async () => {
        await this.send(PsOp.Finish);
        await this.awaitEnd();
      },
      true,
    );
  }

  snapshot(): Promise<ParameterServerSnapshot> {
    return this.timed(0, async () => {
      await this.send(PsOp.Snapshot);
      const [version, buffers, length] = await this.answer();
      const params = new Float32Array(length!);
      await this.comm.recv(params, 0, PsTag.Data);
      const optimizer: Float32Array[] = [];
      for (let i = 0; i < buffers!; i++) {
        const b = new Float32Array(length!);
        await this.comm.recv(b, 0, PsTag.Data);
        optimizer.push(b);
      }
      return { params, version: version!, optimizer };
    });
  }

  /** Tells the server this device is done (it stops serving it). */
  async close(): Promise<void> {
    await this.send(PsOp.Bye);
  }
}
