// bench/js: float32 tensors of 1 KiB, 1 MiB and 64 MiB in Node, one run, side by side:
// libtenso (the packed package) against apache-arrow's IPC path (a one-column table of the
// Float32Array: tableToIPC / tableFromIPC, then the column's values) and JSON (stringify /
// parse of the same numbers); the physical reference for encoding, a TypedArray.set copy of the
// body into new memory; and for LZ4, the C engine decoding the same packet (lz4_decode.c, given
// by run.sh as C_LZ4_BENCH). Medians of repeats, the peers of a row run round-robin (each sees
// the same machine load); ratios are time / libtenso's time.
//
//   node bench.mjs [--json]
import * as tenso from 'libtenso';
// The engine module itself, for the LZ4 row's engine-only time (the same instance libtenso uses).
import * as engine from './node_modules/libtenso/src/engine.js';
import { tableFromArrays, tableFromIPC, tableToIPC } from 'apache-arrow';
import { writeFileSync, mkdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { loadavg } from 'node:os';

const SIZES = [['1 KiB', 1 << 10], ['1 MiB', 1 << 20], ['64 MiB', 64 << 20]];
let sink = 0;

// Median seconds of each function over repeats run round-robin (so that all of them see the
// same machine load): at least 3 rounds, until ~budget seconds (or 200 rounds).
function timeAll(fns, budget = 2.0) {
  const names = Object.keys(fns);
  const t = Object.fromEntries(names.map((k) => [k, []]));
  const start = performance.now();
  let rounds = 0;
  while (rounds < 3 || (rounds < 200 && performance.now() - start < budget * 1000)) {
    for (const k of names) {
      const t0 = performance.now();
      fns[k]();
      t[k].push(performance.now() - t0);
    }
    rounds++;
  }
  return Object.fromEntries(names.map((k) => {
    const a = t[k].sort((x, y) => x - y);
    return [k, a[a.length >> 1] / 1000];
  }));
}

// Median seconds of fn() over repeats: at least 3, until ~1 s (or 200 for small work).
function time(fn, budget = 1.0) {
  const t = [];
  const start = performance.now();
  while (t.length < 3 || (t.length < 200 && performance.now() - start < budget * 1000)) {
    const t0 = performance.now();
    fn();
    t.push(performance.now() - t0);
  }
  t.sort((a, b) => a - b);
  return t[t.length >> 1] / 1000;
}

function data(n) {
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = ((i * 2654435761) % 1000003) / 1000003 - 0.5;
  return x;
}
// Compressible data for the LZ4 rows: a ramp, repeating.
function ramp(n) {
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = (i % 4096) * 0.25;
  return x;
}

// JIT warm-up: every path once before anything is timed.
{
  const w = new tenso.Tensor(data(256), [256]);
  for (let i = 0; i < 2000; i++) tenso.loads(tenso.dumps(w));
}
const rows = [];
const lz4Files = {};
mkdirSync(process.env.BENCH_OUT || '/tmp/tenso-bench-js', { recursive: true });
for (const [label, bytes] of SIZES) {
  const x = data(bytes / 4);
  const t = new tenso.Tensor(x, [x.length]);
  const packet = tenso.dumps(t);
  const ipc = tableToIPC(tableFromArrays({ x }), 'stream');
  const big = bytes >= 64 << 20;
  const json = JSON.stringify(Array.from(x));
  const r = { size: label, bytes };
  r.decode = {
    ...timeAll({
      tenso: () => (sink += tenso.loads(packet).data.length),
      arrow: () => (sink += tableFromIPC(ipc).getChild('x').toArray().length),
    }),
    json: time(() => (sink += JSON.parse(json).length), big ? 0.1 : 1),
  };
  r.encode = {
    ...timeAll({
      tenso: () => (sink += tenso.dumps(t).length),
      arrow: () => (sink += tableToIPC(tableFromArrays({ x }), 'stream').length),
      copy: () => {
        const dst = new Uint8Array(packet.length);
        dst.set(new Uint8Array(x.buffer), packet.length - bytes);
        sink += dst.length;
      },
    }),
    json: time(() => (sink += JSON.stringify(Array.from(x)).length), big ? 0.1 : 1),
  };
  if (bytes >= 1 << 20) {
    const z = tenso.dumps(ramp(bytes / 4), { compress: true });
    const file = `${process.env.BENCH_OUT || '/tmp/tenso-bench-js'}/lz4_${bytes}.tenso`;
    writeFileSync(file, z);
    lz4Files[label] = file;
    // loads (decompressed in engine memory, then copied into a new Float32Array), and the engine
    // alone: tenso_loads of the packet already in engine memory (what the C engine does).
    const zp = engine.copyIn(z);
    const lz4 = timeAll({
      tenso: () => (sink += tenso.loads(z).data.length),
      engine: () => {
        engine.check(engine.wasm.tenso_loads(engine.slot(0), zp, z.length,
          engine.wasm.tenso_js_decode_options(0, 0, 0, 0n, 0n, 0n, 0n)));
        engine.wasm.tenso_view_free(engine.u32At(engine.slot(0)));
      },
    });
    engine.free(zp);
    r.lz4 = { compressed: z.length, ...lz4, file };
  }
  rows.push(r);
}

// The C engine on the same packets, in this run (run.sh builds lz4_decode.c: C_LZ4_BENCH).
const c = process.env.C_LZ4_BENCH
  ? JSON.parse(execFileSync(process.env.C_LZ4_BENCH, Object.values(lz4Files), { encoding: 'utf8' }))
  : {};

const us = (s) => (s < 1e-3 ? `${(s * 1e6).toFixed(1)} µs` : `${(s * 1e3).toFixed(2)} ms`);
const ratio = (s, base) => `${(s / base).toFixed(1)}×`;
const gbs = (bytes, s) => `${(bytes / s / 1e9).toFixed(1)} GB/s`;
const load = loadavg().map((x) => x.toFixed(2)).join(', ');

if (process.argv.includes('--json')) {
  console.log(JSON.stringify({ load, rows, c }, null, 1));
  process.exit(0);
}
console.log(`libtenso ${tenso.version} (WebAssembly) in Node ${process.versions.node}; load average ${load}`);
console.log('');
console.log('| float32 | op | libtenso | apache-arrow (IPC) | JSON | reference |');
console.log('| --- | --- | --- | --- | --- | --- |');
for (const r of rows) {
  const d = r.decode;
  const e = r.encode;
  console.log(`| ${r.size} | decode | ${us(d.tenso)} | ${us(d.arrow)} (${ratio(d.arrow, d.tenso)}) | ${us(d.json)} (${ratio(d.json, d.tenso)}) | |`);
  console.log(`| ${r.size} | encode | ${us(e.tenso)} (${gbs(r.bytes, e.tenso)}) | ${us(e.arrow)} (${ratio(e.arrow, e.tenso)}) | ` +
    `${us(e.json)} (${ratio(e.json, e.tenso)}) | TypedArray.set copy ${us(e.copy)}: libtenso ${ratio(e.tenso, e.copy)} of it |`);
  if (r.lz4) {
    const cs = c[r.lz4.file] / 1e9;
    console.log(`| ${r.size} | LZ4 decode (${(r.bytes / r.lz4.compressed).toFixed(0)}:1) | ${us(r.lz4.tenso)} ` +
      `(${gbs(r.bytes, r.lz4.tenso)}); in the engine ${us(r.lz4.engine)} | | | C engine, 1 thread: ` +
      `${cs ? `${us(cs)}: libtenso ${ratio(r.lz4.tenso, cs)} of it, the engine alone ${ratio(r.lz4.engine, cs)}` : 'not measured'} |`);
  }
}
if (sink === 42) console.log('');
