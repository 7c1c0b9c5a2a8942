import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { downloadFile } from '../../src/data/download.ts';
import { tmpDir } from './helpers.ts';

const body = Buffer.from('fashion bytes '.repeat(1000));
const md5 = createHash('md5').update(body).digest('hex');

/** A loopback server: /ok serves body, /moved redirects to it, /loop to itself, /missing is 404, /hang never answers. */
async function serve(fn: (url: string) => Promise<void>): Promise<void> {
  const server: Server = createServer((req, res) => {
    if (req.url === '/ok') res.end(body);
    else if (req.url === '/moved' || req.url === '/loop') {
      res.writeHead(302, { location: req.url === '/moved' ? '/ok' : '/loop' });
      res.end();
    } else if (req.url === '/hang') {
      /* never answers */
    } else {
      res.statusCode = 404;
      res.end('no');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  try {
    await fn(`http://127.0.0.1:${port}`);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

test('downloads, verifies the MD5, and renames into place', async () => {
  await serve(async (url) => {
    const dir = tmpDir();
    const dest = join(dir, 'sub', 'file.gz');
    await downloadFile(`${url}/ok`, dest, { md5 });
    assert.deepEqual(readFileSync(dest), body);
    assert.deepEqual(readdirSync(join(dir, 'sub')), ['file.gz'], 'no temporary file left');
  });
});

test('an MD5 mismatch keeps nothing', async () => {
  await serve(async (url) => {
    const dest = join(tmpDir(), 'file.gz');
    await assert.rejects(
      downloadFile(`${url}/ok`, dest, { md5: '0'.repeat(32) }),
      /MD5 [0-9a-f]{32} does not match the published 0{32}; the file was not saved/,
    );
    assert.ok(!existsSync(dest));
  });
});

test('HTTP errors and silent servers fail fast', async () => {
  await serve(async (url) => {
    const dest = join(tmpDir(), 'file.gz');
    await assert.rejects(downloadFile(`${url}/missing`, dest), /download of .*\/missing failed: HTTP 404/);
    const started = Date.now();
    await assert.rejects(
      downloadFile(`${url}/hang`, dest, { connectTimeoutMs: 200 }),
      /failed: no answer within 200 ms/,
    );
    assert.ok(Date.now() - started < 2000);
    assert.ok(!existsSync(dest));
  });
});

test('a refused connection fails at once', async () => {
  // a port that was just free: bind, note it, close
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  await assert.rejects(
    downloadFile(`http://127.0.0.1:${port}/x`, join(tmpDir(), 'x')),
    /failed: connect ECONNREFUSED 127\.0\.0\.1:\d+$/,
  );
});

test('redirects are followed, a few of them', async () => {
  await serve(async (url) => {
    const dest = join(tmpDir(), 'file.gz');
    await downloadFile(`${url}/moved`, dest, { md5 });
    assert.deepEqual(readFileSync(dest), body);
    await assert.rejects(downloadFile(`${url}/loop`, join(tmpDir(), 'x')), /\/loop failed: more than 5 redirects$/);
  });
});
