/**
 * Injected faults, for testing a job's straggler and failure handling: which devices compute slower
 * and by what factor, which device throws at which global step, and which device's gradient
 * turns NaN at which step (`nan`, to test that a non-finite step is skipped everywhere). One object built where the
 * faults are given (the `--slow-device` flag, the PARATRAIN_FAIL_AT variable, or TrainOptions'
 * slowDevices/failAt), checked there, and asked by every device's training loop.
 */

/** A plan as plain data: what crosses to worker threads and child processes (structured clone drops classes). */
export interface FaultPlanData {
  /** [device rank, compute slowdown factor ≥ 1 (1: normal speed)] */
  slow: [number, number][];
  /** [device rank, global step at which that device throws] */
  fail: [number, number][];
  /**
   * [device rank, global step at which that device's first gradient becomes NaN]; with 'shard', the
   * first float of its model-parallel shard's gradient instead (a `parallel: model` layer's)
   */
  nan?: ([number, number] | [number, number, 'shard'])[];
  /** where each kind of fault was given, so errors name the flag or option the user wrote */
  slowSource: string;
  failSource: string;
}

function wholeAtLeastZero(n: number): boolean {
  return Number.isInteger(n) && n >= 0;
}

/** Injected faults for testing a job: slow devices, a device that fails at a step, a NaN gradient. */
export class FaultPlan {
  /** No faults: every device at normal speed, none fails. */
  static readonly none = new FaultPlan({});

  private readonly slow: ReadonlyMap<number, number>;
  private readonly fail: ReadonlyMap<number, number>;
  private readonly nan: readonly ([number, number] | [number, number, 'shard'])[];
  private readonly slowSource: string;
  private readonly failSource: string;

  constructor(data: Partial<FaultPlanData>) {
    this.slowSource = data.slowSource ?? 'slowDevices';
    this.failSource = data.failSource ?? 'failAt';
    for (const [rank, factor] of data.slow ?? []) {
      if (!wholeAtLeastZero(rank))
        throw new Error(`${this.slowSource}: a device rank is a whole number ≥ 0, got ${rank}`);
      if (!(Number.isFinite(factor) && factor >= 1))
        throw new Error(
          `${this.slowSource}: device ${rank}'s slowdown factor must be a number ≥ 1 (1: normal speed), got ${factor}`,
        );
    }
    for (const [rank, step] of data.fail ?? []) {
      if (!wholeAtLeastZero(rank))
        throw new Error(`${this.failSource}: a device rank is a whole number ≥ 0, got ${rank}`);
      if (!wholeAtLeastZero(step))
        throw new Error(`${this.failSource}: device ${rank}'s failing step must be a whole number ≥ 0, got ${step}`);
    }
    for (const [rank, step, where] of data.nan ?? []) {
      if (!wholeAtLeastZero(rank) || !wholeAtLeastZero(step))
        throw new Error(`nanAt: expected a device rank and a step, whole numbers ≥ 0, got ${rank}:${step}`);
      if (where !== undefined && where !== 'shard')
        throw new Error(
          `nanAt: device ${rank} at step ${step}: the third field may only be 'shard', got ${JSON.stringify(where)}`,
        );
    }
    this.nan = [...(data.nan ?? [])];
    this.slow = new Map(data.slow);
    this.fail = new Map(data.fail);
  }

  /** From TrainOptions' fields: `slowDevices` (rank → factor) and `failAt`. */
  static fromOptions(o: {
    slowDevices?: ReadonlyMap<number, number>;
    failAt?: { rank: number; step: number };
  }): FaultPlan {
    return new FaultPlan({ slow: [...(o.slowDevices ?? [])], fail: o.failAt ? [[o.failAt.rank, o.failAt.step]] : [] });
  }

  /** From the command line: the `--slow-device` flags (collected by parseSlowDevice) and PARATRAIN_FAIL_AT. */
  static fromCli(o: { slowDevice?: ReadonlyMap<number, number>; failAtEnv?: string }): FaultPlan {
    const failAt = FaultPlan.parseFailAt(o.failAtEnv);
    return new FaultPlan({
      slow: [...(o.slowDevice ?? [])],
      fail: failAt ? [[failAt.rank, failAt.step]] : [],
      slowSource: '--slow-device',
      failSource: 'PARATRAIN_FAIL_AT',
    });
  }

  /** `--slow-device 1:2.5` → [1, 2.5]: rank 1 computes 2.5× slower. */
  static parseSlowDevice(value: string): [number, number] {
    const m = /^(\d+):(\d+(?:\.\d+)?)$/.exec(value);
    if (!m || Number(m[2]) < 1)
      throw new Error(`--slow-device: expected RANK:FACTOR with FACTOR ≥ 1 (e.g. 1:3), got '${value}'`);
    return [Number(m[1]), Number(m[2])];
  }

  /** PARATRAIN_FAIL_AT=RANK:STEP makes that device throw at that step; unset or empty: no failure. */
  static parseFailAt(value: string | undefined): { rank: number; step: number } | undefined {
    if (!value) return undefined;
    const m = /^(\d+):(\d+)$/.exec(value);
    if (!m) throw new Error(`PARATRAIN_FAIL_AT: expected RANK:STEP (e.g. 1:5), got '${value}'`);
    return { rank: Number(m[1]), step: Number(m[2]) };
  }

  static fromData(data: FaultPlanData): FaultPlan {
    return new FaultPlan(data);
  }

  toData(): FaultPlanData {
    return {
      slow: [...this.slow],
      fail: [...this.fail],
      nan: [...this.nan],
      slowSource: this.slowSource,
      failSource: this.failSource,
    };
  }

  /** Refuses a fault on a device the job does not have (it would silently never happen). */
  checkDevices(devices: number): void {
    const check = (source: string, ranks: Iterable<number>) => {
      for (const rank of ranks) {
        if (rank >= devices)
          throw new Error(`${source}: there is no device ${rank} among ${devices} (ranks 0..${devices - 1})`);
      }
    };
    check(this.slowSource, this.slow.keys());
    check(this.failSource, this.fail.keys());
    check(
      'nanAt',
      this.nan.map(([rank]) => rank),
    );
  }

  /** How many times as long device `rank`'s compute takes (1: normal speed). */
  slowdownFor(rank: number): number {
    return this.slow.get(rank) ?? 1;
  }

  /** Whether device `rank` is to throw at global step `step`. */
  failsAt(rank: number, step: number): boolean {
    return this.fail.get(rank) === step;
  }

  /** Whether device `rank`'s gradient is to become NaN at global step `step`: 'whole' (its first float), 'shard' (its shard's first), or false. */
  poisonsAt(rank: number, step: number): 'whole' | 'shard' | false {
    const hit = this.nan.find(([r, s]) => r === rank && s === step);
    return hit ? (hit[2] ?? 'whole') : false;
  }
}
