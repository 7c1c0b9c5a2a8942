/**
 * Measures an emulated link as the simulator describes it (α-β), from inside two of
 * scripts/emulated-network.ts's namespaces:
 *
 *   node --import tsx scripts/link-probe.ts serve PORT             (in host 1)
 *   node --import tsx scripts/link-probe.ts probe HOST PORT BYTES  (in host 0)
 *
 * α: half the median round trip of 1-byte messages (TCP_NODELAY), what a small message costs one
 * way; β: BYTES sent each way at once (the server sends as many back as it receives: a ring's and
 * a parameter server's traffic crosses the link both ways), after a warm-up transfer (the
 * congestion window open), over the time until both have arrived, less one round trip. Prints one JSON line. Bounded: the server
 * exits after 60 s, the probe times out after 60 s.
 */
import { createConnection, createServer, type Socket } from 'node:net';

const LIMIT_MS = 60_000;

function serve(port: number): void {
  const server = createServer((sock) => {
    sock.setNoDelay(true);
    let want = -1, got = 0, header = Buffer.alloc(0);
    sock.on('data', (chunk: Buffer) => {
      if (want < 0) {
        header = Buffer.concat([header, chunk]);
        if (header[0] === 0x70) { sock.write(Buffer.from([0x70])); header = Buffer.alloc(0); return; }
        if (header.length < 9) return;
        want = Number(header.readBigUInt64LE(1));
        got = header.length - 9;
        // the same amount goes back at once: both directions of the link carry data together
        sock.write(Buffer.alloc(want));
      } else {
        got += chunk.length;
      }
      if (want >= 0 && got >= want) { sock.write(Buffer.from([0x61])); want = -1; got = 0; header = Buffer.alloc(0); }
    });
    sock.on('error', () => {});
  });
  server.listen(port, '0.0.0.0', () => process.stdout.write('listening\n'));
  setTimeout(() => process.exit(0), LIMIT_MS).unref();
}

function once(sock: Socket): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const fail = (e: Error) => reject(e);
    sock.once('error', fail);
    sock.once('data', (d: Buffer) => { sock.off('error', fail); resolve(d); });
  });
}

async function probe(host: string, port: number, bytes: number): Promise<void> {
  setTimeout(() => { process.stderr.write('link-probe: timed out\n'); process.exit(1); }, LIMIT_MS).unref();
  const sock = await new Promise<Socket>((resolve, reject) => {
    const s = createConnection({ host, port }, () => resolve(s));
    s.once('error', reject);
  });
  sock.setNoDelay(true);
  const rtts: number[] = [];
  for (let i = 0; i < 60; i++) {
    const t0 = performance.now();
    sock.write(Buffer.from([0x70]));
    await once(sock);
    if (i >= 10) rtts.push(performance.now() - t0);
  }
  rtts.sort((a, b) => a - b);
  const rtt = rtts[rtts.length >> 1]!;
  /** n bytes each way at once; resolves when the n bytes back and the server's acknowledgement are in */
  const bulk = (n: number): Promise<number> => new Promise((resolve, reject) => {
    const head = Buffer.alloc(9);
    head[0] = 0x62;
    head.writeBigUInt64LE(BigInt(n), 1);
    let got = 0;
    const t0 = performance.now();
    const onData = (d: Buffer) => {
      got += d.length;
      if (got >= n + 1) { sock.off('data', onData); sock.off('error', reject); resolve((performance.now() - t0) / 1000); }
    };
    sock.on('data', onData);
    sock.on('error', reject);
    sock.write(Buffer.concat([head, Buffer.alloc(n)]));
  });
  await bulk(Math.min(bytes, 4 << 20));
  const seconds = await bulk(bytes);
  sock.end();
  const alpha = rtt / 2 / 1000;
  process.stdout.write(`${JSON.stringify({ rttMs: rtt, alpha, seconds, bytes, beta: bytes / Math.max(1e-9, seconds - rtt / 1000) })}\n`);
}

const [mode, a, b, c] = process.argv.slice(2);
if (mode === 'serve') serve(Number(a));
else if (mode === 'probe') await probe(a!, Number(b), Number(c));
else {
  process.stderr.write('usage: link-probe.ts serve PORT | probe HOST PORT BYTES\n');
  process.exit(2);
}
