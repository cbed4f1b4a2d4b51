// A real browser and a real tenso.serve: Debian's chromium, headless (playwright-core), loads the
// viewer (sdk/js/examples/viewer) and the packed package from a static server on 127.0.0.1;
// the viewer fetches tensors from tenso.serve under uvicorn (the Python SDK, sdk/js/test/serve.py)
// on 127.0.0.1 and draws them. The test reads the canvas's pixels and keeps a screenshot
// (TENSO_JS_ARTIFACTS/viewer.png). Node's fetchTensor talks to the same server. The same package
// files also decode and re-encode every golden vector inside the browser.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import * as tenso from 'libtenso';
import { vectorsDir } from './helpers.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const viewerDir = join(here, '../examples/viewer');
const artifacts = process.env.TENSO_JS_ARTIFACTS || tmpdir();
const python = process.env.TENSO_SDK_PYTHON;

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json' };

let api;
let apiUrl;
let files;
let filesUrl;
let context;
let profile;

function listen(server) {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
}

async function freePort() {
  const s = createServer();
  const port = await listen(s);
  await new Promise((r) => s.close(r));
  return port;
}

async function waitForHealth(url, child, deadlineMs) {
  const end = Date.now() + deadlineMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`tenso.serve exited (${child.exitCode})`);
    try {
      const r = await fetch(`${url}/health`);
      if (r.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > end) throw new Error('tenso.serve did not start in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}

before(async () => {
  assert.ok(python, 'TENSO_SDK_PYTHON: the Python SDK venv (sdk/js/run-tests.sh sets it)');
  const port = await freePort();
  api = spawn(python, [join(here, 'serve.py'), String(port)], { stdio: ['ignore', 'inherit', 'inherit'] });
  apiUrl = `http://127.0.0.1:${port}`;
  await waitForHealth(apiUrl, api, 30000);

  // The viewer page at /, the installed package at /node_modules/libtenso/.
  files = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const file = path.startsWith('/node_modules/')
      ? normalize(join(here, path))
      : path.startsWith('/vectors/')
        ? normalize(join(vectorsDir, path.slice('/vectors/'.length)))
        : normalize(join(viewerDir, path === '/' ? 'index.html' : path));
    const roots = [viewerDir, join(here, 'node_modules'), vectorsDir];
    if (!roots.some((r) => file.startsWith(r)) || !statSync(file, { throwIfNoEntry: false })?.isFile()) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[extname(file)] || 'application/octet-stream' }).end(readFileSync(file));
  });
  filesUrl = `http://127.0.0.1:${await listen(files)}`;

  profile = mkdtempSync(join(tmpdir(), 'tenso-chromium-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
    viewport: { width: 1100, height: 760 },
  });
});

after(async () => {
  await context?.close();
  files?.close();
  api?.kill();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

async function openViewer(page, path) {
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${filesUrl}/?url=${encodeURIComponent(apiUrl + path)}`);
  await page.waitForFunction(() => document.body.dataset.state, null, { timeout: 20000 });
  const state = await page.evaluate(() => document.body.dataset.state);
  assert.equal(state, 'shown', `viewer: ${await page.textContent('#error')} ${errors.join('; ')}`);
}

test('the viewer draws a tensor from tenso.serve: viridis from (i + j)', async () => {
  const page = await context.newPage();
  await openViewer(page, '/tensor');
  const info = await page.textContent('#info');
  assert.match(info, /float32/);
  assert.match(info, /\[48, 64\]/);
  assert.match(info, /max110/);
  const px = await page.evaluate(() => {
    const c = document.getElementById('canvas');
    const ctx = c.getContext('2d');
    const at = (x, y) => [...ctx.getImageData(x, y, 1, 1).data];
    return { w: c.width, h: c.height, drawn: c.dataset.drawn, first: at(0, 0), last: at(c.width - 1, c.height - 1),
      mid: at(Math.floor(c.width / 2), Math.floor(c.height / 2)) };
  });
  assert.equal(px.drawn, 'image');
  assert.equal(px.w / px.h, 64 / 48);
  assert.deepEqual(px.first, [68, 1, 84, 255], 'the minimum is viridis(0)');
  assert.deepEqual(px.last, [253, 231, 37, 255], 'the maximum is viridis(1)');
  // The centre, (24 + 32) / 110 of the way: between viridis' greens and blues, not an end colour.
  assert.ok(px.mid[1] > 100 && px.mid[2] > 100 && px.mid[0] < 100, `centre pixel ${px.mid}`);
  await page.screenshot({ path: join(artifacts, 'viewer.png') });
  await page.close();
});

test('the viewer shows a bundle as a tree, and a 1-D tensor as a line', async () => {
  const page = await context.newPage();
  await openViewer(page, '/bundle');
  const labels = await page.$$eval('#tree li > span', (s) => s.map((x) => x.textContent));
  assert.deepEqual(labels.slice(1), ['image: float32 [8, 8]', 'signal: float32 [100]', 'labels: int64 [4]']);
  await page.click('text=signal: float32 [100]');
  const line = await page.evaluate(() => {
    const c = document.getElementById('canvas');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let blue = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] < 100 && d[i + 2] > 150) blue++;
    return { drawn: c.dataset.drawn, blue };
  });
  assert.equal(line.drawn, 'line');
  assert.ok(line.blue > 200, `${line.blue} line pixels`);
  await page.screenshot({ path: join(artifacts, 'viewer-bundle.png') });
  await page.close();
});

test('fetchTensor against tenso.serve: GET, POST to an endpoint, its 400 and 422', async () => {
  const t = await tenso.fetchTensor(`${apiUrl}/tensor`);
  assert.deepEqual(t.shape, [48, 64]);
  assert.equal(t.data[64 + 1], 2);
  const x = new tenso.Tensor(new Float32Array([1, 2, 3]), [3]);
  const doubled = await tenso.fetchTensor(`${apiUrl}/double`, { tensor: x, checkIntegrity: true });
  assert.deepEqual([...doubled.data], [2, 4, 6]);
  await assert.rejects(tenso.fetchTensor(`${apiUrl}/double`, { method: 'POST', body: 'hello', headers: { 'content-type': 'text/plain' } }),
    (e) => e instanceof tenso.TensoHTTPError && e.httpStatus === 400);
  await assert.rejects(tenso.fetchTensor(`${apiUrl}/double`, { method: 'POST', body: new Uint8Array(20),
    headers: { 'content-type': 'application/octet-stream' } }),
  (e) => e instanceof tenso.TensoHTTPError && e.httpStatus === 422 && /^Invalid Tenso packet/.test(e.detail));
  const stream = [];
  for await (const v of tenso.decodeStream((await fetch(`${apiUrl}/bundle`)).body)) stream.push(v);
  assert.deepEqual(Object.keys(stream[0]), ['image', 'signal', 'labels']);
});

test('in the browser: every golden vector decodes, and the uncompressed ones re-encode to their bytes', async () => {
  const page = await context.newPage();
  await page.goto(`${filesUrl}/`); // the viewer's page: its import map names libtenso
  const result = await page.evaluate(async () => {
    const tenso = await import('libtenso');
    const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
    const manifest = await (await fetch('/vectors/manifest.json')).json();
    const failures = [];
    let checked = 0;
    for (const c of manifest.cases) {
      if (c.producer !== 'upstream') continue;
      try {
        const bytes = new Uint8Array(await (await fetch(`/vectors/${c.file}`)).arrayBuffer());
        const value = c.value.kind === 'ragged' ? tenso.loadsRagged(bytes) : tenso.loads(bytes);
        const again = tenso.dumps(value, { checkIntegrity: c.options.check_integrity, alignment: c.options.alignment,
          compress: c.compressed });
        if (!c.compressed && hex(again) !== hex(bytes)) failures.push(`${c.name}: re-encoded bytes differ`);
        if (c.compressed && hex(tenso.dumps(tenso.loads(again))) !== hex(tenso.dumps(value))) failures.push(`${c.name}: LZ4 round trip`);
        checked++;
      } catch (e) {
        failures.push(`${c.name}: ${e.name}: ${e.message}`);
      }
    }
    return { checked, failures, float16: typeof Float16Array };
  });
  assert.deepEqual(result.failures, []);
  assert.ok(result.checked >= 80, `${result.checked} vectors`);
  await page.close();
});
