// Round trips of every dtype and kind with every encode option, zero-copy and alignment rules,
// options and limits, errors, the push decoder over web and Node streams.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import * as tenso from 'libtenso';
import { hex } from './helpers.js';

const DENSE = Object.entries(tenso.dtypes).filter(([, d]) => d.kind === 'dense').map(([name]) => name);
const OPTIONS = [
  {},
  { checkIntegrity: true },
  { compress: true },
  { compress: true, checkIntegrity: true },
  { alignment: 128 },
  { alignment: 4096, checkIntegrity: true },
  { alignment: 1 },
];

// Deterministic bytes for a tensor of `n` elements of `dtype`.
function sample(dtype, shape) {
  const n = shape.reduce((a, b) => a * b, 1);
  const bytes = new Uint8Array(n * tenso.dtypes[dtype].itemsize);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 131 + 7) & 0xff;
  if (dtype === 'bool') bytes.forEach((b, i) => (bytes[i] = b & 1));
  return tenso.Tensor.fromBytes(bytes, shape, dtype);
}

function same(a, b) {
  if (a instanceof tenso.Tensor) {
    assert.ok(b instanceof tenso.Tensor);
    assert.equal(b.dtype, a.dtype);
    assert.deepEqual(b.shape, a.shape);
    assert.equal(hex(b.bytes), hex(a.bytes));
  } else if (a instanceof tenso.StringTensor) {
    assert.deepEqual(b.strings, a.strings);
  } else if (a instanceof tenso.QuantizedTensor) {
    assert.equal(hex(b.data), hex(a.data));
    assert.deepEqual([b.dtype, b.scheme, b.axis, b.groupSize, b.shape], [a.dtype, a.scheme, a.axis, a.groupSize, a.shape]);
    assert.equal(hex(b.scales), hex(a.scales));
  } else if (a instanceof tenso.SparseMatrix) {
    assert.equal(b.format, a.format);
    assert.deepEqual(b.shape, a.shape);
    a.components.forEach((c, i) => same(c, b.components[i]));
  } else if (a instanceof tenso.RaggedArray) {
    assert.deepEqual(b.offsets, a.offsets);
    same(a.flat, b.flat);
  } else if (a instanceof tenso.GpuIpcRef) {
    assert.deepEqual(b, a);
  } else {
    assert.deepEqual(Object.keys(b), Object.keys(a));
    for (const k of Object.keys(a)) same(a[k], b[k]);
  }
}

test('every dense dtype, shape and option round-trips', () => {
  for (const dtype of DENSE) {
    for (const shape of [[], [0], [7], [3, 5], [2, 3, 4], [1, 1, 1, 1, 1, 9]]) {
      for (const o of OPTIONS) {
        const t = sample(dtype, shape);
        const packet = tenso.dumps(t, o);
        same(t, tenso.loads(packet));
        const info = tenso.packetInfo(packet);
        assert.equal(info.dtype, dtype);
        assert.equal(info.packetSize, packet.length);
        assert.equal(info.integrity, !!o.checkIntegrity);
      }
    }
  }
});

test('typed arrays map to their dtypes; Float16Array where the runtime has one', () => {
  assert.equal(tenso.loads(tenso.dumps(new Float64Array([1.5]))).dtype, 'float64');
  assert.equal(tenso.loads(tenso.dumps(new BigInt64Array([-5n]))).data[0], -5n);
  assert.equal(tenso.loads(tenso.dumps(new Uint8ClampedArray([255]))).dtype, 'uint8');
  const f16 = tenso.loads(tenso.dumps(sample('float16', [4]))).data;
  assert.equal(f16.constructor, globalThis.Float16Array || Uint16Array);
  const c64 = tenso.loads(tenso.dumps(sample('complex64', [3])));
  assert.equal(c64.data.length, 6, 'complex: interleaved (re, im) lanes');
});

const kinds = () => ({
  bundle: { a: sample('float32', [4, 4]), b: { nested: sample('int64', [3]) }, '': sample('uint8', [0]),
    'ключ 🔑': sample('bool', [5]), __proto__x: sample('int8', [1]) },
  strings: new tenso.StringTensor(['', 'hello', 'wörld', '日本語 🎉']),
  coo: new tenso.SparseMatrix('coo', [3, 4], new Float32Array([1, 2, 3]), new Int32Array([0, 1, 2]), new Int32Array([3, 2, 0])),
  csr: new tenso.SparseMatrix('csr', [3, 3], new Float64Array([1, 2]), new BigInt64Array([0n, 2n]), new BigInt64Array([0n, 1n, 1n, 2n])),
  csc: new tenso.SparseMatrix('csc', [2, 2], new Float32Array([5]), new Int32Array([1]), new Int32Array([0, 0, 1])),
  quantized: tenso.quantize(sample('float32', [4, 6]), { dtype: 'qint4', scheme: 'per_group', groupSize: 5 }),
  ragged: tenso.RaggedArray.fromRows([new Float32Array([1, 2, 3]), new Float32Array([]), new Float32Array([4])]),
  ipc: new tenso.GpuIpcRef({ handle: new Uint8Array(64).fill(7), deviceUuid: new Uint8Array(16).fill(9), byteOffset: 4096, nbytes: 1 << 20 }),
});

test('every kind round-trips alone and inside a bundle', () => {
  const all = kinds();
  for (const [name, value] of Object.entries(all)) {
    if (name === 'ragged') {
      same(value, tenso.loadsRagged(tenso.dumps(value)));
      continue;
    }
    for (const o of [{}, { checkIntegrity: true }, { compress: true }]) same(value, tenso.loads(tenso.dumps(value, o)));
  }
  const { ragged, ...rest } = all;
  same(rest, tenso.loads(tenso.dumps(rest, { checkIntegrity: true })));
  assert.ok(ragged);
});

test('quantize and dequantize: every dtype and scheme', () => {
  const x = new tenso.Tensor(Float32Array.from({ length: 24 }, (_, i) => Math.sin(i) * 3), [4, 6]);
  for (const dtype of ['qint8', 'quint8', 'qint4', 'quint4']) {
    for (const [scheme, extra] of [['per_tensor', {}], ['per_channel', { axis: 1 }], ['per_group', { groupSize: 7 }]]) {
      const q = tenso.quantize(x, { dtype, scheme, ...extra });
      const back = tenso.dequantize(q);
      assert.deepEqual(back.shape, [4, 6]);
      const err = Math.max(...back.data.map((v, i) => Math.abs(v - x.data[i])));
      assert.ok(err < (dtype.endsWith('4') ? 0.5 : 0.05), `${dtype} ${scheme}: error ${err}`);
      same(q, tenso.loads(tenso.dumps(q)));
    }
  }
});

test('loads is zero-copy over an aligned buffer; copies what a typed array cannot view', () => {
  const t = new tenso.Tensor(new Float64Array(1000).fill(2.5), [10, 100]);
  const packet = tenso.dumps(t);
  const view = tenso.loads(packet);
  assert.equal(view.data.buffer, packet.buffer);
  packet[packet.length - 1] = 0x41; // the view sees the caller's bytes
  assert.notEqual(view.data[999], 2.5);
  const copy = tenso.loads(packet, { copy: true });
  assert.notEqual(copy.data.buffer, packet.buffer);
  // The same packet at an odd offset: a typed array cannot view it, so it is copied...
  const shifted = new Uint8Array(packet.length + 1);
  shifted.set(packet, 1);
  const moved = tenso.loads(shifted.subarray(1));
  assert.notEqual(moved.data.buffer, shifted.buffer);
  assert.equal(hex(moved.bytes), hex(view.bytes));
  // ... unless align: false forbids it.
  assert.throws(() => tenso.loads(shifted.subarray(1), { align: false }), tenso.TensoValueError);
  // Bundle members are views of the caller's bytes too (their bodies are aligned relative to
  // their own sub-packet, so wider elements may need the copy).
  const b = tenso.dumps({ x: t, y: new Uint8Array([1, 2, 3]) });
  assert.equal(tenso.loads(b).y.data.buffer, b.buffer);
  // ArrayBuffer, DataView and Buffer inputs.
  assert.equal(tenso.loads(packet.buffer).size, 1000);
  assert.equal(tenso.loads(new DataView(packet.buffer)).size, 1000);
  assert.equal(tenso.loads(Buffer.from(packet)).size, 1000);
});

test('integrity: a flipped body bit is a TensoChecksumError, unless skipChecksum', () => {
  for (const value of [new Float32Array(300000).fill(1), { a: new Float32Array(10) }, new tenso.StringTensor(['x', 'y'])]) {
    const p = tenso.dumps(value, { checkIntegrity: true });
    p[p.length - 9] ^= 1; // the last body byte, before the 8-byte footer
    assert.throws(() => tenso.loads(p), (e) => e instanceof tenso.TensoChecksumError && e.statusName === 'TENSO_E_CHECKSUM');
    tenso.loads(p, { skipChecksum: true });
  }
});

test('limits: defaults from the C ABI, tighter ones refuse', () => {
  assert.deepEqual(tenso.limits, { maxNdim: 32, maxElements: 1e9, maxDepth: 64, maxBundleEntries: 255, maxKeyBytes: 65536,
    defaultAlignment: 64, maxAlignment: 2 ** 20 });
  const p = tenso.dumps(new tenso.Tensor(new Float32Array(24), [2, 3, 4]));
  assert.throws(() => tenso.loads(p, { maxNdim: 2 }), (e) => e instanceof tenso.TensoLimitError && e.statusName === 'TENSO_E_TOO_MANY_DIMS');
  assert.throws(() => tenso.loads(p, { maxElements: 23 }), (e) => e.statusName === 'TENSO_E_TOO_MANY_ELEMENTS');
  assert.throws(() => tenso.loads(p, { maxPacketBytes: 100 }), (e) => e.statusName === 'TENSO_E_LIMIT');
  const deep = tenso.dumps({ a: { b: { c: new Float32Array(1) } } });
  assert.throws(() => tenso.loads(deep, { maxDepth: 2 }), tenso.TensoLimitError);
  assert.throws(() => tenso.loads(deep, { maxEntries: 2 }), tenso.TensoLimitError);
  assert.throws(() => tenso.loads(p, { maxNdim: -1 }), tenso.TensoValueError);
});

test('encoding errors: the engine refuses, with its status', () => {
  const big = Object.fromEntries(Array.from({ length: 256 }, (_, i) => [`k${i}`, new Uint8Array(1)]));
  assert.throws(() => tenso.dumps(big), tenso.TensoValueError);
  assert.throws(() => tenso.dumps(new tenso.Tensor(new Float32Array(5), [2, 3])), tenso.TensoValueError);
  assert.throws(() => tenso.dumps(new Float32Array(4), { alignment: 3 }), tenso.TensoValueError);
  assert.throws(() => tenso.dumps('text'), tenso.TensoTypeError);
  assert.throws(() => tenso.dumps(new tenso.SparseMatrix('coo', [2, 2], new Float32Array([1]), new Int32Array([5]), new Int32Array([0]))),
    tenso.TensoValueError);
  const cyclic = {};
  cyclic.self = cyclic;
  assert.throws(() => tenso.dumps(cyclic), tenso.TensoLimitError);
  assert.throws(() => tenso.loads('not bytes'), tenso.TensoTypeError);
});

test('large tensors: 64 MiB dense, compressed and hashed', () => {
  const t = new Float32Array(16 << 20).map((_, i) => i % 1000);
  for (const o of [{}, { compress: true }, { checkIntegrity: true }]) {
    const p = tenso.dumps(t, o);
    const back = tenso.loads(p);
    assert.equal(back.size, t.length);
    assert.equal(back.data[12345], 345);
  }
});

// ---- streams ----

function packets() {
  return [sample('float32', [3, 4]), { a: sample('int16', [5]) }, new tenso.StringTensor(['a', 'b']), sample('uint8', [70000])];
}
const stream = () => {
  const parts = packets().map((v, i) => tenso.dumps(v, { compress: i === 3, checkIntegrity: i === 1 }));
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    all.set(p, o);
    o += p.length;
  }
  return all;
};
function* chunks(bytes, size) {
  for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
}

test('Decoder: packets from chunks of any size', () => {
  const bytes = stream();
  for (const size of [1, 3, 64, 4096, bytes.length]) {
    const d = new tenso.Decoder();
    const got = [];
    for (const c of chunks(bytes, size)) got.push(...d.push(c));
    d.finish();
    assert.ok(d.idle);
    d.close();
    assert.equal(got.length, 4);
    packets().forEach((v, i) => same(v, got[i]));
  }
});

test('decodeStream over a web ReadableStream, a Node Readable and a fetch body', async () => {
  const bytes = stream();
  const web = new ReadableStream({
    start(c) {
      for (const x of chunks(bytes, 1000)) c.enqueue(x);
      c.close();
    },
  });
  const a = [];
  for await (const v of tenso.decodeStream(web)) a.push(v);
  const b = [];
  for await (const v of tenso.decodeStream(Readable.from([...chunks(bytes, 777)].map((c) => Buffer.from(c))))) b.push(v);
  const c = [];
  for await (const v of tenso.decodeStream(new Response(bytes).body)) c.push(v);
  for (const got of [a, b, c]) packets().forEach((v, i) => same(v, got[i]));
});

test('decodeStream: a stream cut inside a packet is a TensoTruncatedError; limits apply before allocation', async () => {
  const bytes = stream();
  await assert.rejects(async () => {
    for await (const _ of tenso.decodeStream([bytes.subarray(0, bytes.length - 3)])) void _;
  }, (e) => e instanceof tenso.TensoTruncatedError && e.statusName === 'TENSO_E_TRUNCATED');
  await assert.rejects(async () => {
    for await (const _ of tenso.decodeStream([bytes], { maxPacketBytes: 1000 })) void _;
  }, tenso.TensoLimitError);
  const d = new tenso.Decoder();
  assert.throws(() => d.push(new TextEncoder().encode('garbage, not a packet')), tenso.TensoCorruptError);
  d.reset();
  assert.equal(d.push(tenso.dumps(new Float32Array([1]))).length, 1);
  d.close();
});

// ---- HTTP helpers (the server side of tenso.serve's protocol) ----

test('tensorResponse and readTensorResponse: tenso.fastapi headers', async () => {
  const t = new tenso.Tensor(new Float32Array(6), [2, 3]);
  const r = tenso.tensorResponse(t, { filename: 'x.tenso' });
  assert.equal(r.headers.get('content-type'), 'application/octet-stream');
  assert.equal(r.headers.get('x-tenso-version'), '4');
  assert.equal(r.headers.get('x-tenso-shape'), '(2, 3)');
  assert.equal(r.headers.get('x-tenso-dtype'), 'float32');
  assert.match(r.headers.get('content-disposition'), /x\.tenso/);
  same(t, await tenso.readTensorResponse(r));
  assert.equal(tenso.tensorResponse(new Float32Array(5)).headers.get('x-tenso-shape'), '(5,)');
  await assert.rejects(tenso.readTensorResponse(Response.json({ detail: 'nope' }, { status: 422 })),
    (e) => e instanceof tenso.TensoHTTPError && e.httpStatus === 422 && e.detail === 'nope');
});

test('tensorEndpoint answers 400, 413 and 422 as tenso.fastapi does', async () => {
  const handler = tenso.tensorEndpoint((x) => new tenso.Tensor(x.data.map((v) => v * 2), x.shape), { maxBodyBytes: 4096 });
  const post = (body, type = 'application/octet-stream') =>
    handler(new Request('http://127.0.0.1/infer', { method: 'POST', body, headers: { 'content-type': type } }));
  const ok = await post(tenso.dumps(new Float32Array([1, 2])));
  assert.equal(ok.status, 200);
  assert.deepEqual([...(await tenso.readTensorResponse(ok)).data], [2, 4]);
  assert.equal((await post(tenso.dumps(new Float32Array(2)), 'text/plain')).status, 400);
  assert.equal((await post(tenso.dumps(new Float32Array(5000)))).status, 413);
  const bad = await post(new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]));
  assert.equal(bad.status, 422);
  assert.match((await bad.json()).detail, /^Invalid Tenso packet: /);
  assert.equal((await post(tenso.dumps(new Float32Array(64)).subarray(0, 70))).status, 422);
  assert.equal((await post(new Uint8Array(0))).status, 422);
});

test('the package version is the engine version', async () => {
  const { default: pkg } = await import('libtenso/package.json', { with: { type: 'json' } });
  assert.equal(pkg.version, tenso.version);
  assert.equal(tenso.protocolVersion, 4);
});

test('dumps of a dense body without integrity or compression never copies it into engine memory', async () => {
  const engine = await import(new URL('./node_modules/libtenso/src/engine.js', import.meta.url));
  // Larger than all of engine memory: had the body been copied in, memory would have grown.
  const before = engine.mem().length;
  const t = new Uint8Array(before + (16 << 20)).fill(3);
  const packet = tenso.dumps(t);
  assert.equal(engine.mem().length, before);
  assert.equal(tenso.loads(packet).data[12345], 3);
  // With a footer the engine reads the body: then it is copied in (and memory grows).
  tenso.dumps(t, { checkIntegrity: true });
  assert.ok(engine.mem().length > before);
});

test('loads and packetInfo copy a packet into engine memory, not the bytes after it', async () => {
  const engine = await import(new URL('./node_modules/libtenso/src/engine.js', import.meta.url));
  const packet = tenso.dumps({ a: new Float32Array([1, 2, 3]), s: new tenso.StringTensor(['x']) });
  // Packets one after another at the head of a buffer larger than all of engine memory: had any
  // loads or packetInfo copied the rest of the buffer in, memory would have grown.
  const before = engine.mem().length;
  const buf = new Uint8Array(before + (16 << 20));
  for (let i = 0; i < 100; i++) buf.set(packet, i * packet.length);
  for (let o = 0, i = 0; i < 100; i++) {
    const rest = buf.subarray(o);
    assert.equal(tenso.packetInfo(rest).packetSize, packet.length);
    assert.deepEqual([...tenso.loads(rest).a.data], [1, 2, 3]);
    o += packet.length;
  }
  assert.equal(engine.mem().length, before);
  // A size the module's 32-bit size_t cannot hold is out of memory, never a smaller block.
  for (const n of [2 ** 32 - 1, 2 ** 32 + 64]) {
    assert.throws(() => engine.malloc(n), (e) => e instanceof tenso.TensoMemoryError && e.statusName === 'TENSO_E_NO_MEMORY');
  }
});

test('loads of a 4 GiB input: the packet at its head, as the 32-bit engine can see it', (t) => {
  let big;
  try {
    big = new Uint8Array(2 ** 32); // zero pages, untouched but for the packets written
  } catch {
    t.skip('no 4 GiB ArrayBuffer here');
    return;
  }
  big.set(tenso.dumps({ a: new Float32Array([1, 2, 3]) }));
  assert.deepEqual([...tenso.loads(big).a.data], [1, 2, 3]);
  assert.equal(tenso.packetInfo(big).kind, 'bundle');
  // A packet longer than the framing prefix: all the engine can address is copied in, which
  // does not fit beside the engine's own memory.
  big.set(tenso.dumps({ a: new Uint8Array(1 << 20) }));
  assert.throws(() => tenso.loads(big), tenso.TensoMemoryError);
  assert.throws(() => tenso.packetInfo(big), tenso.TensoMemoryError);
});

test('readTensorResponse: maxPacketBytes refuses a body of undeclared length as it arrives', async () => {
  // A server that sends no Content-Length and does not stop: refused after about the limit,
  // not buffered to its end.
  let sent = 0;
  const endless = new ReadableStream({
    pull(c) {
      if (sent >= 256 << 20) c.close();
      else {
        sent += 1 << 16;
        c.enqueue(new Uint8Array(1 << 16));
      }
    },
  });
  await assert.rejects(tenso.readTensorResponse(new Response(endless), { maxPacketBytes: 1 << 20 }),
    (e) => e instanceof tenso.TensoLimitError && e.statusName === 'TENSO_E_LIMIT');
  assert.ok(sent <= 2 << 20, `read ${sent} bytes of a body refused at 1 MiB`);
  // Bodies within the limit, whatever their chunks: one byte at a time, or declared.
  const packet = tenso.dumps({ x: sample('float64', [300]), y: new tenso.StringTensor(['a']) });
  const drip = new ReadableStream({
    start(c) {
      for (const b of packet) c.enqueue(new Uint8Array([b]));
      c.close();
    },
  });
  same(tenso.loads(packet), await tenso.readTensorResponse(new Response(drip), { maxPacketBytes: packet.length }));
  same(tenso.loads(packet), await tenso.readTensorResponse(new Response(packet, { headers: { 'content-length': String(packet.length) } })));
});

test('errors the JavaScript layer raises name the status of their class, never TENSO_E_INTERNAL', () => {
  const cyclic = {};
  cyclic.self = cyclic;
  const odd = new Uint8Array(tenso.dumps(new Float32Array(4)).length + 1); // a body at an odd byte
  odd.set(tenso.dumps(new Float32Array(4)), 1);
  const cases = [
    [() => tenso.loads(tenso.dumps(new Float32Array(1)), { maxNdim: -1 }), tenso.TensoValueError, 'TENSO_E_INVALID_ARGUMENT'],
    [() => tenso.loads(odd.subarray(1), { align: false }), tenso.TensoValueError, 'TENSO_E_INVALID_ARGUMENT'],
    [() => tenso.loads('not bytes'), tenso.TensoTypeError, 'TENSO_E_INVALID_ARGUMENT'],
    [() => tenso.dumps(cyclic), tenso.TensoLimitError, 'TENSO_E_LIMIT'],
    [() => new tenso.Tensor(new Float32Array(2), [3, -1]), tenso.TensoValueError, 'TENSO_E_INVALID_ARGUMENT'],
  ];
  for (const [f, Cls, statusName] of cases) {
    assert.throws(f, (e) => e instanceof Cls && e.statusName === statusName, `${f}: ${statusName}`);
  }
});

test('GpuIpcRef: a handle or device uuid of another length is refused, never read past nor cut', () => {
  // Had a short handle been read past its end, engine memory (this key) would fill the packet.
  tenso.dumps({ 'a key left behind in engine memory': new tenso.StringTensor(['x']) });
  for (const [h, u] of [[3, 16], [200, 16], [64, 1]]) {
    const ref = new tenso.GpuIpcRef({ handle: new Uint8Array(h), deviceUuid: new Uint8Array(u), byteOffset: 0, nbytes: 0 });
    assert.throws(() => tenso.dumps(ref),
      (e) => e instanceof tenso.TensoValueError && e.statusName === 'TENSO_E_INVALID_ARGUMENT' && /64 bytes/.test(e.message));
  }
  const ref = new tenso.GpuIpcRef({ handle: new Uint8Array(64).map((_, i) => i), deviceUuid: new Uint8Array(16).fill(9),
    byteOffset: 4096, nbytes: 2 ** 40 });
  assert.deepEqual(tenso.loads(tenso.dumps(ref)), ref);
});

test('readTensorResponse: a body it refuses by its content type is cancelled, not left open', async () => {
  let cancelled = false;
  const body = new ReadableStream({
    pull(c) {
      c.enqueue(new TextEncoder().encode('<html>'));
    },
    cancel() {
      cancelled = true;
    },
  });
  await assert.rejects(tenso.readTensorResponse(new Response(body, { headers: { 'content-type': 'text/html' } })),
    (e) => e instanceof tenso.TensoHTTPError && /expected application\/octet-stream, got text\/html/.test(e.message));
  assert.ok(cancelled);
});

test('a SharedArrayBuffer another thread rewrites: copy: true returns the bytes the checksum was checked on', async () => {
  const { Worker } = await import('node:worker_threads');
  const n = 1 << 18;
  // The same packet twice: a dense one (header path) and inside a bundle (decoded in engine memory).
  for (const value of [new Float32Array(n).fill(1), { x: new Float32Array(n).fill(1) }]) {
    const packet = tenso.dumps(value, { checkIntegrity: true });
    const body = Buffer.from(packet).indexOf(Buffer.from(new Float32Array(16).fill(1).buffer));
    const shared = new Uint8Array(new SharedArrayBuffer(packet.length));
    shared.set(packet);
    // The other thread flips the body between ones (what the footer hashes) and twos, forever.
    const worker = new Worker(`
      const { workerData: [sab, at, n] } = require('node:worker_threads');
      const body = new Uint8Array(sab, at, 4 * n);
      const [ones, twos] = [1, 2].map((v) => new Uint8Array(new Float32Array(n).fill(v).buffer));
      for (;;) { body.set(twos); body.set(ones); }`, { eval: true, workerData: [shared.buffer, body, n] });
    await new Promise((resolve) => worker.once('online', resolve));
    try {
      let checked = 0;
      for (let i = 0; i < 400 && checked < 20; i++) {
        let got;
        try {
          got = tenso.loads(shared, { copy: true });
        } catch (e) {
          assert.ok(e instanceof tenso.TensoChecksumError, String(e));
          continue;
        }
        const t = got instanceof tenso.Tensor ? got : got.x;
        checked++;
        assert.ok(t.data.every((v) => v === 1), 'a copy that passed the checksum holds what was hashed');
      }
    } finally {
      await worker.terminate();
    }
  }
});

test('dumps with compress: the packet does not hold the worst-case bound of memory', () => {
  const t = new Float32Array(4 << 20).map((_, i) => i % 1000);
  const p = tenso.dumps(t, { compress: true });
  assert.ok(p.length < t.byteLength / 8, `compressed to ${p.length}`);
  assert.ok(p.buffer.byteLength <= p.length * 1.125, `a ${p.length}-byte packet holds ${p.buffer.byteLength} bytes`);
  assert.equal(tenso.loads(p).data[4321], 321);
});

test('a bundle whose keys are data, shape and dtype is a bundle unless they are a tensor\'s parts', () => {
  const bundle = { data: new Float32Array([1, 2]), shape: new Int32Array([2]), dtype: new tenso.StringTensor(['float32']) };
  const back = tenso.loads(tenso.dumps(bundle));
  assert.deepEqual(Object.keys(back), ['data', 'shape', 'dtype']);
  assert.deepEqual(back.dtype.strings, ['float32']);
  const t = tenso.loads(tenso.dumps({ data: new Float32Array([1, 2, 3, 4]), shape: [2, 2], dtype: 'float32' }));
  assert.ok(t instanceof tenso.Tensor);
  assert.deepEqual(t.shape, [2, 2]);
});
