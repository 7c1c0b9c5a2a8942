import { Tensor } from '../../tensor/tensor.ts';
import { shapeSize } from '../../tensor/shape.ts';
import type { Backend } from '../../kernels/backend.ts';
import type { Communicator } from '../../comm/communicator.ts';
import type { ForwardContext } from '../../nn/layer.ts';
import { allgatherRows, sectionRows, CollectiveBuffers, ExchangeScratch, type RowSplit } from './activationExchange.ts';
import { SectionLayer } from './sectionLayer.ts';

/**
 * The model-parallel section's exit when it ends 'full' (every device's samples): keeps this
 * device's own rows for the data-parallel layers after it; backward all-gathers the rows' gradients.
 */
export class SliceRows extends SectionLayer {
  readonly name: string;
  private readonly scratch = new ExchangeScratch();
  private readonly shared: CollectiveBuffers;
  private rows: RowSplit | null = null;

  constructor(
    private readonly comm: Communicator,
    private readonly backend: Backend,
    readonly inputShape: readonly number[],
  ) {
    super();
    this.name = "model-parallel section exit (this device's rows)";
    this.shared = new CollectiveBuffers(backend, comm);
  }

  get outputShape(): readonly number[] {
    return this.inputShape;
  }

  /** a view of its input: nothing of its own */
  savedForBackward(): readonly ArrayBufferView[] {
    return [];
  }

  async forwardAsync(x: Tensor, ctx: ForwardContext): Promise<Tensor> {
    const rows = sectionRows(ctx, this.comm.size);
    const width = x.size / x.batch,
      r = this.comm.rank,
      start = rows.starts[r]! * width;
    this.rows = rows;
    return new Tensor([rows.counts[r]!, ...x.shape.slice(1)], x.data.subarray(start, start + rows.counts[r]! * width));
  }

  async backwardAsync(dy: Tensor): Promise<Tensor> {
    const rows = this.rows!,
      sample = dy.shape.slice(1),
      width = shapeSize(sample);
    const grad = await this.shared.get('grad', rows.total * width);
    await allgatherRows(this.comm, this.backend.device, dy.data, rows, width, grad, this.scratch);
    return new Tensor([rows.total, ...sample], grad);
  }
}
