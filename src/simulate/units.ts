/**
 * The simulator's command-line quantities: links (`10gbit:50us`), shared-memory channels
 * (`4GB/s:2us`), rates, durations and device lists (`8,64,512`, `1..1024`). Every parse error is one
 * line naming the flag, the bad text and a correct example.
 */

/** A link described by α-β: a message of n bytes takes alpha + n / beta seconds. */
export interface Link {
  /** as the user wrote it, for tables and legends */
  name: string;
  /** latency per message, seconds */
  alpha: number;
  /** bandwidth, bytes per second */
  beta: number;
}

const RATE_UNITS: Record<string, number> = {
  bit: 1 / 8,
  kbit: 1e3 / 8,
  mbit: 1e6 / 8,
  gbit: 1e9 / 8,
  tbit: 1e12 / 8,
  bps: 1 / 8,
  kbps: 1e3 / 8,
  mbps: 1e6 / 8,
  gbps: 1e9 / 8,
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
};

const TIME_UNITS: Record<string, number> = { ns: 1e-9, us: 1e-6, µs: 1e-6, ms: 1e-3, s: 1 };

function split(text: string): { value: number; unit: string } | null {
  const m = /^\s*([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*([a-zµ/]*)\s*$/i.exec(text);
  if (!m) return null;
  return { value: Number(m[1]), unit: m[2]!.toLowerCase() };
}

/** `10gbit`, `100mbit/s`, `4GB/s`, `1.4GB` → bytes per second. */
export function parseRate(text: string, flag: string): number {
  const s = split(text);
  const unit = s?.unit.replace(/\/s$/, '');
  const factor = unit !== undefined ? RATE_UNITS[unit] : undefined;
  if (!s || factor === undefined || !(s.value > 0)) {
    throw new Error(`${flag}: '${text}' is not a rate; write e.g. 10gbit, 100mbit, 4GB/s or 1.5GiB/s`);
  }
  return s.value * factor;
}

/** `50us`, `2ms`, `0.1s`, `0` → seconds. */
export function parseDuration(text: string, flag: string): number {
  const s = split(text);
  if (s && s.value === 0 && s.unit === '') return 0;
  const factor = s ? TIME_UNITS[s.unit] : undefined;
  if (!s || factor === undefined || !(s.value >= 0)) {
    throw new Error(`${flag}: '${text}' is not a duration; write e.g. 50us, 2ms or 0`);
  }
  return s.value * factor;
}

/** `10gbit:50us` → a link (bandwidth, then latency). */
export function parseLink(text: string, flag = '--link'): Link {
  const parts = text.split(':');
  if (parts.length !== 2)
    throw new Error(`${flag}: '${text}' is not BANDWIDTH:LATENCY; write e.g. 10gbit:50us or 100mbit:2ms`);
  return { name: text.trim(), beta: parseRate(parts[0]!, flag), alpha: parseDuration(parts[1]!, flag) };
}

/** A comma-separated list of links. */
export function parseLinks(text: string, flag = '--link'): Link[] {
  const links = text
    .split(',')
    .filter((s) => s.trim() !== '')
    .map((s) => parseLink(s, flag));
  if (!links.length) throw new Error(`${flag}: no link given; write e.g. 10gbit:50us`);
  return links;
}

/** `8,64,512` or `1..1024` (the powers of two from 1 to 1024), mixed freely; sorted, without repeats. */
export function parseDevices(text: string, flag = '--devices'): number[] {
  const out = new Set<number>();
  for (const part of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const range = /^(\d+)\.\.(\d+)$/.exec(part);
    if (range) {
      const lo = Number(range[1]),
        hi = Number(range[2]);
      if (lo < 1 || hi < lo) throw new Error(`${flag}: '${part}' is not a range of device counts; write e.g. 1..1024`);
      for (let g = 1; g <= hi; g *= 2) if (g >= lo) out.add(g);
      continue;
    }
    const g = Number(part);
    if (!Number.isInteger(g) || g < 1)
      throw new Error(`${flag}: '${part}' is not a device count; write e.g. 8,64,512 or 1..1024`);
    out.add(g);
  }
  if (!out.size) throw new Error(`${flag}: no device count given; write e.g. 8,64,512 or 1..1024`);
  return [...out].sort((a, b) => a - b);
}

/** Human-readable rate: 1.25 GB/s → "10 Gbit/s". */
export function formatRate(bytesPerSecond: number): string {
  const bits = bytesPerSecond * 8;
  for (const [unit, f] of [
    ['Tbit/s', 1e12],
    ['Gbit/s', 1e9],
    ['Mbit/s', 1e6],
    ['kbit/s', 1e3],
  ] as const) {
    if (bits >= f) return `${+(bits / f).toPrecision(3)} ${unit}`;
  }
  return `${+bits.toPrecision(3)} bit/s`;
}

/** Human-readable rate in bytes: 1.4e9 → "1.4 GB/s". */
export function formatByteRate(bytesPerSecond: number): string {
  for (const [unit, f] of [
    ['TB/s', 1e12],
    ['GB/s', 1e9],
    ['MB/s', 1e6],
    ['kB/s', 1e3],
  ] as const) {
    if (bytesPerSecond >= f) return `${+(bytesPerSecond / f).toPrecision(3)} ${unit}`;
  }
  return `${+bytesPerSecond.toPrecision(3)} B/s`;
}

/** Human-readable duration from seconds. */
export function formatDuration(seconds: number): string {
  if (seconds >= 1) return `${+seconds.toPrecision(3)} s`;
  if (seconds >= 1e-3) return `${+(seconds * 1e3).toPrecision(3)} ms`;
  return `${+(seconds * 1e6).toPrecision(3)} µs`;
}
