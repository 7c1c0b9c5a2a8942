/**
 * The transport's data path (payload slots, hashing, reduction; dataPath.ts) and native ring
 * (nativeRing.ts), made on first use: a world of one never needs either.
 */
import { TcpDataPath } from './dataPath.ts';
import { NativeRing } from './nativeRing.ts';

export class DataEngines {
  private dataPathInstance: TcpDataPath | undefined;
  private nativeRingInstance: NativeRing | null | undefined;

  /** `nativeDataPath`: use the native addon where it is built (TcpConnectOptions.nativeDataPath) */
  constructor(
    private readonly nativeDataPath: boolean,
    private readonly maxFrameBytes: number,
  ) {}

  get dataPath(): TcpDataPath {
    return (this.dataPathInstance ??= new TcpDataPath(undefined, this.nativeDataPath));
  }

  /** the native ring (native/tcp/ring.c), or null where the addon lacks it, nativeDataPath is off or PARATRAIN_TCP_NATIVE_RING=0 */
  get nativeRing(): NativeRing | null {
    if (this.nativeRingInstance === undefined) {
      this.nativeRingInstance =
        process.env.PARATRAIN_TCP_NATIVE_RING === '0' ? null : NativeRing.of(this.dataPath.native, this.maxFrameBytes);
    }
    return this.nativeRingInstance;
  }
}
