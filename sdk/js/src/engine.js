// engine.js - the WebAssembly engine: libtenso's impl/format and C ABI compiled by emscripten
// (sdk/js/wasm), instantiated once when the package is imported, with no emscripten glue.
//
// Everything here moves bytes in and out of the module's linear memory and turns statuses into
// errors; every rule of the format is the engine's. Views of linear memory are taken fresh
// after each call that may allocate (memory.grow detaches the old ArrayBuffer).
import { errorFor } from './errors.js';

const wasmUrl = new URL('./tenso.wasm', import.meta.url);

async function instantiate(imports) {
  const isNode = typeof process !== 'undefined' && process.versions != null && process.versions.node != null;
  if (isNode && wasmUrl.protocol === 'file:') {
    const { readFile } = await import('node:fs/promises');
    return WebAssembly.instantiate(await readFile(wasmUrl), imports);
  }
  const response = await fetch(wasmUrl);
  if (!response.ok) throw new Error(`tenso: cannot load ${wasmUrl} (HTTP ${response.status})`);
  if (WebAssembly.instantiateStreaming && /application\/wasm/.test(response.headers.get('content-type') || '')) {
    return WebAssembly.instantiateStreaming(response, imports);
  }
  return WebAssembly.instantiate(await response.arrayBuffer(), imports);
}

// tenso_value_write_cb's pieces go to whichever sink the current encode set (dumps in index.js).
let pieceSink = null;

const { instance } = await instantiate({
  tenso: { piece: (p, n, borrowed) => pieceSink(p >>> 0, n >>> 0, borrowed) },
  env: { emscripten_notify_memory_growth: () => {} },
  wasi_snapshot_preview1: {
    proc_exit: (code) => {
      throw new Error(`tenso: the WebAssembly engine exited (${code})`);
    },
  },
});

/** The module's exports: tenso_* (C ABI) and tenso_js_* (sdk/js/wasm/entry.cpp). */
export const wasm = instance.exports;
wasm._initialize();

let heap = new Uint8Array(wasm.memory.buffer);
let dv = new DataView(wasm.memory.buffer);
/** Linear memory as bytes (fresh views when it has grown: memory.grow detaches the old
 *  ArrayBuffer, which leaves the old view empty). */
export function mem() {
  if (heap.length === 0) {
    heap = new Uint8Array(wasm.memory.buffer);
    dv = new DataView(wasm.memory.buffer);
  }
  return heap;
}
/** Linear memory as a DataView. */
export function memView() {
  mem();
  return dv;
}

export function setPieceSink(fn) {
  pieceSink = fn;
}

const utf8 = new TextDecoder('utf-8', { fatal: false });
const utf8Strict = new TextDecoder('utf-8', { fatal: true });
export const encoder = new TextEncoder();

/** The NUL-terminated string at ptr. */
export function cstr(ptr) {
  ptr >>>= 0;
  if (!ptr) return '';
  const m = mem();
  let end = ptr;
  while (m[end] !== 0) end++;
  return utf8.decode(m.subarray(ptr, end));
}
/** UTF-8 bytes as a string (invalid sequences throw: keys and strings were checked by the engine). */
export function utf8String(bytes) {
  return utf8Strict.decode(bytes);
}

/** Memory the engine can read, 64-byte aligned; release with free(). */
export function malloc(n) {
  // A size_t is 32 bits in the module: a larger n would reach it wrapped, as a small block.
  const p = n < 2 ** 32 ? wasm.tenso_js_malloc(n) >>> 0 : 0;
  if (!p) throw errorFor('TENSO_E_NO_MEMORY', `out of WebAssembly memory (asked for ${n} bytes)`);
  return p;
}
export function free(p) {
  if (p) wasm.tenso_js_free(p);
}

/** Copies bytes (a Uint8Array) into fresh engine memory; returns its address. */
export function copyIn(bytes) {
  const p = malloc(bytes.length);
  mem().set(bytes, p);
  return p;
}

/** Throws the error class for a failed status, with the engine's message. */
export function check(status) {
  if (status !== 0) throw lastError(status);
}
export function lastError(status) {
  return errorFor(cstr(wasm.tenso_status_name(status)), cstr(wasm.tenso_last_error()), status);
}

// Out-parameters and records: one scratch area (the module is single-threaded, and no call
// here re-enters another).
const SCRATCH = 1024;
export const scratch = malloc(SCRATCH);
/** Addresses inside the scratch area: out-parameter slots and a record of up to 48 uint64. */
export const slot = (i) => scratch + 4 * i; // 4-byte slots 0..15 (pointers and size_t on wasm32)
export const rec = scratch + 64;
export function u32At(p) {
  return memView().getUint32(p, true);
}
/** A uint64 in memory as a Number (sizes, offsets, dims: below 2^53). */
export function u64At(p) {
  const d = memView();
  return d.getUint32(p, true) + d.getUint32(p + 4, true) * 4294967296;
}
/** Writes Numbers (below 2^53) as uint64 at p. */
export function setU64s(p, values) {
  const d = memView();
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    d.setUint32(p + 8 * i, v >>> 0, true);
    d.setUint32(p + 8 * i + 4, Math.floor(v / 4294967296), true);
  }
}
export function recAt(i) {
  return u64At(rec + 8 * i);
}

/** A tenso.h macro's value, by name. */
export function constant(name) {
  const p = copyIn(encoder.encode(name + '\0'));
  try {
    const v = wasm.tenso_js_constant(p, slot(0));
    if (!u32At(slot(0))) throw new Error(`tenso: the engine has no constant ${name}`);
    return Number(v);
  } finally {
    free(p);
  }
}

/** Every dtype the engine knows: name, code, itemsize, bits and kind name. */
export function dtypeTable() {
  const out = [];
  for (let i = 0; i < wasm.tenso_dtype_count(); i++) {
    const code = wasm.tenso_dtype_at(i);
    out.push({
      code,
      name: cstr(wasm.tenso_dtype_name(code)),
      itemsize: wasm.tenso_dtype_itemsize(code) >>> 0,
      bits: wasm.tenso_dtype_bits(code) >>> 0,
      kind: cstr(wasm.tenso_kind_name(wasm.tenso_dtype_kind(code))),
    });
  }
  return out;
}
/** Every kind the engine knows: code -> name. */
export function kindTable() {
  const out = new Map();
  for (let i = 0; i < wasm.tenso_kind_count(); i++) {
    const code = wasm.tenso_kind_at(i);
    out.set(code, cstr(wasm.tenso_kind_name(code)));
  }
  return out;
}
