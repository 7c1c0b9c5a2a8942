/** Small helpers the benchmarks share: flags, medians, a free port. */
import net from 'node:net';

/** The value after `--name` in args, if given. */
export function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
}

/** The middle value; of an even count, the mean of the middle two (the upper one alone flattered 2-round runs). */
export const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b),
    h = s.length >> 1;
  return s.length % 2 ? s[h]! : (s[h - 1]! + s[h]!) / 2;
};

/** A loopback TCP port that was free a moment ago. */
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
