// codec.js - dumps, loads, packetInfo, quantize and dequantize over the WebAssembly engine.
//
// loads: a dense, uncompressed packet is decoded from its header alone (tenso_js_loads_dense);
// its body stays where it is and comes back as a typed-array view of the caller's ArrayBuffer,
// so loads is O(1) in the body's size (integrity footers are checked by hashing the body in
// slices, never keeping a second copy). Every other packet is copied into engine memory once
// and decoded there by tenso_loads; its dense bodies are still handed back as views of the
// caller's bytes, and the engine copy is freed before loads returns.
//
// dumps: the engine plans the packet (tenso_value_write_cb) and hands it over piece by piece:
// headers, padding and footers from engine memory, bodies as "borrowed" pieces. A body the
// engine does not read (no integrity, no compression: the documented contract of
// tenso_value_write_cb) never enters engine memory at all: the value describes it by a
// placeholder address, and its piece is copied straight from the caller's typed array into the
// packet - one copy of the body, as TypedArray.set makes.
import {
  wasm, mem, setU64s, check, malloc, free, copyIn, slot, rec, recAt, u32At, u64At, constant,
  kindTable, setPieceSink, encoder, utf8String,
} from './engine.js';
import { TensoLimitError, TensoMemoryError, TensoTypeError, TensoValueError } from './errors.js';
import {
  Tensor, SparseMatrix, QuantizedTensor, StringTensor, RaggedArray, GpuIpcRef, asTensor, isTensorLike, arrayType,
  dtypeInfo, dtypeByCode, numel, describe, SCHEMES, SCHEME_NAMES,
} from './values.js';

const KIND = kindTable();
const C = {
  ENCODE_INTEGRITY: constant('TENSO_ENCODE_INTEGRITY'),
  ENCODE_COMPRESS: constant('TENSO_ENCODE_COMPRESS'),
  SKIP_CHECKSUM: constant('TENSO_DECODE_SKIP_CHECKSUM'),
  VALIDATE_UTF8: constant('TENSO_DECODE_VALIDATE_UTF8'),
  FLAG_INTEGRITY: constant('TENSO_FLAG_INTEGRITY'),
  FLAG_COMPRESSION: constant('TENSO_FLAG_COMPRESSION'),
  MAX_DEPTH: constant('TENSO_MAX_DEPTH'),
};

/** The protocol's limits and defaults, as the C ABI has them (tenso.h). */
export const limits = Object.freeze({
  maxNdim: constant('TENSO_MAX_NDIM'),
  maxElements: constant('TENSO_MAX_ELEMENTS'),
  maxDepth: constant('TENSO_MAX_DEPTH'),
  maxBundleEntries: constant('TENSO_MAX_BUNDLE_ENTRIES'),
  maxKeyBytes: constant('TENSO_MAX_KEY_BYTES'),
  defaultAlignment: constant('TENSO_DEFAULT_ALIGNMENT'),
  maxAlignment: constant('TENSO_MAX_ALIGNMENT'),
});

// How much of a packet tenso_js_loads_dense is shown: room for any dense header the engine
// accepts today; one that did not fit would only take the whole-packet path.
const HEAD = 256;
const head = malloc(HEAD);
const MAX_LEN = 2 ** 32 - 1;
// How much of its input withView frames a packet from (copyPacket), and packetInfo reads first.
const FRAME_PREFIX = 1 << 16;
const FRAME_MIN_INPUT = 16 << 20;
// Bodies under integrity are hashed through this window.
const HASH_WINDOW = 1 << 20;
let hashWindow = 0;

// ------------------------------------------------------------------------------------------
// Options
// ------------------------------------------------------------------------------------------

function isEmpty(o) {
  for (const k in o) if (o[k] !== undefined) return false;
  return true;
}

function count(options, name, max = 2 ** 53) {
  const v = options[name] ?? 0;
  if (!Number.isSafeInteger(v) || v < 0 || v > max) {
    throw new TensoValueError(`options.${name} must be an integer from 0 to ${max}, got ${v}`);
  }
  return v;
}

/** tenso_decode_options for loads/Decoder options (static storage in the engine). */
export function decodeOptions(options = {}) {
  // Defaults, but on one thread: a WebAssembly instance has no others to start.
  if (isEmpty(options)) return wasm.tenso_js_decode_options(0, 0, 0, 0n, 0n, 0n, 0n) >>> 0;
  const flags = (options.skipChecksum ? C.SKIP_CHECKSUM : 0) | (options.validateUtf8 ? C.VALIDATE_UTF8 : 0);
  const f = {
    maxNdim: count(options, 'maxNdim', 2 ** 32 - 1),
    maxDepth: count(options, 'maxDepth', 2 ** 32 - 1),
    maxElements: count(options, 'maxElements'),
    maxPacketBytes: count(options, 'maxPacketBytes'),
    maxDecodedBytes: count(options, 'maxDecodedBytes'),
    maxEntries: count(options, 'maxEntries'),
  };
  return wasm.tenso_js_decode_options(flags, f.maxNdim, f.maxDepth, BigInt(f.maxElements), BigInt(f.maxPacketBytes),
    BigInt(f.maxDecodedBytes), BigInt(f.maxEntries)) >>> 0;
}

function encodeOptions(options) {
  const flags = (options.checkIntegrity ? C.ENCODE_INTEGRITY : 0) | (options.compress ? C.ENCODE_COMPRESS : 0);
  const alignment = count(options, 'alignment', 2 ** 32 - 1);
  const level = options.compressionLevel ?? 0;
  if (!Number.isInteger(level)) throw new TensoValueError('options.compressionLevel must be an integer');
  return { flags, ptr: () => wasm.tenso_js_encode_options(flags, alignment, level) >>> 0 };
}

/** The bytes of an ArrayBuffer, typed array, DataView or Node Buffer, as a Uint8Array view. */
export function bytesOf(data) {
  if (data instanceof Uint8Array) return data;
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (data instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && data instanceof SharedArrayBuffer)) {
    return new Uint8Array(data);
  }
  throw new TensoTypeError(`expected bytes (ArrayBuffer, typed array, Buffer), got ${describe(data)}`);
}

// ------------------------------------------------------------------------------------------
// Decoding
// ------------------------------------------------------------------------------------------

function shapeAt(ptr, ndim) {
  const out = new Array(ndim);
  for (let i = 0; i < ndim; i++) out[i] = u64At(ptr + 8 * i);
  return out;
}

// A dense tensor's elements: a view of the caller's bytes (src, at off) when allowed and
// aligned for the element type, else a copy - of the engine's copy at wasmPtr when there is
// one (what the engine checked, even if the caller's bytes are shared and change), else of src.
function elements(dtype, shape, src, off, nbytes, wasmPtr, options) {
  const Ctor = arrayType(dtype);
  const count = nbytes / Ctor.BYTES_PER_ELEMENT;
  if (nbytes === 0) return new Tensor(new Ctor(0), shape, dtype); // an empty body has no address
  if (src) {
    const at = src.byteOffset + off;
    if (!options.copy && at % Ctor.BYTES_PER_ELEMENT === 0) return new Tensor(new Ctor(src.buffer, at, count), shape, dtype);
    if (!options.copy && options.align === false) {
      throw new TensoValueError(`${dtype} body at byte ${at} of the buffer is not aligned for a typed array ` +
        '(align: false forbids the aligned copy)');
    }
  }
  const data = new Ctor(count);
  const bytes = new Uint8Array(data.buffer);
  bytes.set(wasmPtr == null ? src.subarray(off, off + nbytes) : mem().subarray(wasmPtr, wasmPtr + nbytes));
  return new Tensor(data, shape, dtype);
}

// Checks the XXH3 of `body` against the 8-byte `footer` through the engine's hasher, one window
// of the body at a time.
function verifyBody(body, footer) {
  if (!hashWindow) hashWindow = malloc(HASH_WINDOW);
  const h = wasm.tenso_js_hasher_new() >>> 0;
  if (!h) throw new TensoMemoryError('out of WebAssembly memory for a hasher');
  try {
    for (let done = 0; done < body.length; done += HASH_WINDOW) {
      const k = Math.min(HASH_WINDOW, body.length - done);
      mem().set(body.subarray(done, done + k), hashWindow);
      wasm.tenso_js_hasher_update(h, hashWindow, k);
    }
    mem().set(footer, head);
    check(wasm.tenso_js_hasher_check(h, head));
  } finally {
    wasm.tenso_js_hasher_free(h);
  }
}

// The JavaScript value of a decoded view. ctx.src: the caller's bytes, copied to engine memory
// at ctx.base (their bodies are returned as views of src); src null: copy everything out.
function convert(v, ctx, options) {
  const kind = KIND.get(wasm.tenso_view_kind(v));
  const mapped = (ptr) => (ctx.src ? ptr - ctx.base : -1);
  switch (kind) {
    case 'dense': {
      const dtype = dtypeByCode.get(wasm.tenso_view_dtype(v)).name;
      const ndim = wasm.tenso_view_ndim(v);
      const shape = shapeAt(wasm.tenso_view_shape(v) >>> 0, ndim);
      const ptr = wasm.tenso_view_data(v) >>> 0;
      const nbytes = Number(wasm.tenso_view_nbytes(v));
      const owned = wasm.tenso_view_owns_data(v) !== 0;
      return elements(dtype, shape, owned ? null : ctx.src, mapped(ptr), nbytes, ptr, options);
    }
    case 'bundle': {
      const out = {};
      const n = wasm.tenso_view_bundle_count(v);
      for (let i = 0; i < n; i++) {
        check(wasm.tenso_view_bundle_entry(slot(0), slot(1), slot(2), v, i));
        const kp = u32At(slot(0));
        const key = utf8String(mem().subarray(kp, kp + u32At(slot(1))));
        const child = u32At(slot(2));
        // defineProperty: a key such as "__proto__" is data, never the object's prototype.
        Object.defineProperty(out, key, { value: convert(child, ctx, options), enumerable: true, writable: true,
          configurable: true });
      }
      return out;
    }
    case 'sparse_coo':
    case 'sparse_csr':
    case 'sparse_csc': {
      const parts = [0, 1, 2].map((i) => {
        check(wasm.tenso_view_component(slot(0), v, i));
        return convert(u32At(slot(0)), ctx, options);
      });
      const shape = shapeAt(wasm.tenso_view_shape(v) >>> 0, wasm.tenso_view_ndim(v));
      return new SparseMatrix(kind.slice(7), shape, ...parts);
    }
    case 'quantized': {
      check(wasm.tenso_js_view_quantized(rec, v));
      const [data, nbytes, scales, zps, ndim, dtype, scheme, axis, groupSize, nscales] =
        Array.from({ length: 10 }, (_, i) => recAt(i));
      const m = mem();
      const f32 = (p) => new Float32Array(m.slice(p, p + 4 * nscales).buffer);
      const packed = ctx.src && !options.copy ? ctx.src.subarray(mapped(data), mapped(data) + nbytes)
        : m.slice(data, data + nbytes);
      return new QuantizedTensor({ data: packed, shape: shapeAt(wasm.tenso_view_shape(v) >>> 0, ndim),
        dtype: dtypeByCode.get(dtype).name, scheme: SCHEME_NAMES.get(scheme), axis, groupSize,
        scales: f32(scales), zeroPoints: f32(zps) });
    }
    case 'string':
    case 'ragged': {
      check(wasm.tenso_view_string_offsets(slot(0), slot(1), v));
      const offs = u32At(slot(0));
      const payload = u32At(slot(1));
      const n = u64At(wasm.tenso_view_shape(v) >>> 0);
      const offsets = shapeAt(offs, n + 1);
      const m = mem();
      if (kind === 'string') {
        const dec = new TextDecoder();
        return new StringTensor(offsets.slice(0, n).map((o, i) => dec.decode(m.subarray(payload + o, payload + offsets[i + 1]))));
      }
      // A direct ragged packet: rows are byte ranges of the payload, of the packet's dtype.
      const dtype = dtypeByCode.get(wasm.tenso_view_dtype(v)).name;
      const size = dtypeInfo.get(dtype).itemsize;
      const flat = elements(dtype, [offsets[n] / size], null, 0, offsets[n], payload, options);
      return new RaggedArray(flat, offsets.map((o) => o / size));
    }
    case 'gpu_ipc_ref': {
      check(wasm.tenso_js_view_ipc_ref(rec, v));
      const handle = rec + 32;
      const uuid = handle + recAt(2);
      return new GpuIpcRef({ handle: mem().slice(handle, uuid), deviceUuid: mem().slice(uuid, uuid + recAt(3)),
        byteOffset: recAt(0), nbytes: recAt(1) });
    }
    default:
      throw new TensoTypeError(`the engine returned a packet of kind ${kind}, which this package does not know`);
  }
}

// The packet at the start of src, copied into engine memory: [address, length]; free(address).
// An input over 16 MiB is first framed by the engine (tenso_inspect) from its first 64 KiB, so
// a packet with many bytes after it (a slot with slack, a file read whole) costs its own length,
// not the input's. Otherwise - a smaller input, or a packet the prefix does not hold - the input
// is copied whole, as far as the 32-bit engine reaches (4 GiB - 1 bytes). A failed framing
// costs ~10-25 us (exceptions in the engine): 30% of copying 1 MiB, 2% of 16 MiB.
function copyPacket(src) {
  const len = Math.min(src.length, MAX_LEN);
  if (len > FRAME_MIN_INPUT) {
    const p = copyIn(src.subarray(0, FRAME_PREFIX));
    if (wasm.tenso_js_inspect(rec, p, FRAME_PREFIX) === 0 && recAt(9)) return [p, recAt(9)];
    free(p); // longer than the prefix, or refused: tenso_loads of it all says why
  }
  return [copyIn(src.subarray(0, len)), len];
}

// Decodes the whole packet in engine memory and hands the view to fn(view, ctx).
function withView(src, options, fn) {
  const opts = decodeOptions(options);
  const [p, len] = copyPacket(src);
  try {
    check(wasm.tenso_loads(slot(0), p, len, opts));
    const v = u32At(slot(0));
    try {
      return fn(v, { src, base: p });
    } finally {
      wasm.tenso_view_free(v);
    }
  } finally {
    free(p);
  }
}

/**
 * Decodes a Tenso packet (trailing bytes after it are ignored).
 *
 * @param data the packet: ArrayBuffer, Uint8Array (Node Buffer) or any typed array / DataView.
 * @param options decode limits (maxPacketBytes, maxDecodedBytes, maxEntries, maxNdim,
 *   maxElements, maxDepth; 0 = the protocol's own), skipChecksum, validateUtf8; copy: true for
 *   tensors that own their memory; align: false to refuse the copy a misaligned body needs.
 * @returns a Tensor, a plain object (bundle), SparseMatrix, QuantizedTensor, StringTensor,
 *   RaggedArray (direct ragged packets) or GpuIpcRef.
 */
export function loads(data, options = {}) {
  const src = bytesOf(data);
  const opts = decodeOptions(options);
  const have = Math.min(src.length, HEAD);
  mem().set(src.subarray(0, have), head);
  // The engine's sizes are 32-bit: longer input is seen as its first 4 GiB - 1 bytes (bytes
  // after the packet are ignored anyway; a packet that needs more is TRUNCATED).
  check(wasm.tenso_js_loads_dense(slot(0), rec, head, have, Math.min(src.length, MAX_LEN), opts));
  if (u32At(slot(0))) {
    const ndim = recAt(1);
    const shape = Array.from({ length: ndim }, (_, i) => recAt(9 + i));
    const dtype = dtypeByCode.get(recAt(0)).name;
    const off = recAt(5);
    const nbytes = recAt(6);
    const footer = recAt(8) ? src.slice(recAt(8), recAt(7)) : null;
    // The body is hashed as returned: a copy (copy: true, misaligned) is what was checked.
    const t = elements(dtype, shape, src, off, nbytes, null, options);
    if (footer) verifyBody(t.bytes, footer);
    return t;
  }
  return withView(src, options, (v, ctx) => convert(v, ctx, options));
}

/** What a packet's header says, read without decoding its body. */
export function packetInfo(data) {
  const src = bytesOf(data);
  const prefix = src.subarray(0, Math.min(src.length, FRAME_PREFIX));
  let p = copyIn(prefix);
  try {
    check(wasm.tenso_js_inspect(rec, p, prefix.length));
    let r = Array.from({ length: 10 }, (_, i) => recAt(i));
    if (!r[9] && src.length > prefix.length) {
      // Not all of it in the prefix: the dense header path knows a dense packet's length, and
      // any other packet is inspected whole.
      const len = Math.min(src.length, MAX_LEN);
      mem().set(src.subarray(0, HEAD), head);
      check(wasm.tenso_js_loads_dense(slot(0), rec, head, HEAD, len, 0));
      if (!u32At(slot(0))) {
        free(p);
        p = 0;
        p = copyIn(src.subarray(0, len));
        check(wasm.tenso_js_inspect(rec, p, len));
        r = Array.from({ length: 10 }, (_, i) => recAt(i));
      } else {
        r[8] = recAt(6);
        r[9] = recAt(7);
        check(wasm.tenso_js_inspect(rec, head, HEAD));
      }
    }
    const [version, flags, kind, dtype, ndim, entryCount, alignment, bodyOffset, bodySize, packetSize] = r;
    return {
      version,
      flags,
      kind: KIND.get(kind),
      dtype: dtypeByCode.has(dtype) ? dtypeByCode.get(dtype).name : null,
      ndim,
      shape: Array.from({ length: ndim }, (_, i) => recAt(10 + i)),
      entryCount,
      alignment,
      bodyOffset,
      bodySize,
      packetSize,
      integrity: (flags & C.FLAG_INTEGRITY) !== 0,
      compressed: (flags & C.FLAG_COMPRESSION) !== 0,
    };
  } finally {
    free(p);
  }
}

// ------------------------------------------------------------------------------------------
// Encoding
// ------------------------------------------------------------------------------------------

// Placeholder addresses for bodies the engine only places: they count down from the top of the
// 32-bit address space, far above the engine's memory (checked as they are handed out).
const TOKEN_TOP = 2 ** 32 - 4096;
const TOKEN_MARGIN = 256 * 2 ** 20;

// Small inputs of an encode (shapes, keys, offsets) are bump-allocated from this block, which
// every encode reuses; larger ones get memory of their own.
const ARENA = 16384;
const arena = malloc(ARENA);

class Encoding {
  constructor(readsBodies) {
    this.readsBodies = readsBodies;
    this.allocs = [];
    this.values = [];
    this.tokens = []; // { addr, bytes }, addr descending
    this.top = TOKEN_TOP;
    this.used = 0;
  }
  release() {
    for (const v of this.values) wasm.tenso_value_free(v);
    for (const p of this.allocs) free(p);
  }
  alloc(n) {
    const size = (n + 63) & ~63;
    if (this.used + size <= ARENA) {
      const p = arena + this.used;
      this.used += size;
      return p;
    }
    const p = malloc(n);
    this.allocs.push(p);
    return p;
  }
  copy(bytes) {
    const p = this.alloc(bytes.length);
    mem().set(bytes, p);
    return p;
  }
  u64s(values) {
    const p = this.alloc(8 * Math.max(values.length, 1));
    setU64s(p, values);
    return p;
  }
  f32s(values) {
    return this.copy(new Uint8Array(Float32Array.from(values).buffer));
  }
  // A body's address for the engine: a copy when it will be read, else a placeholder.
  body(bytes, mustRead = false) {
    if (bytes.length === 0) return 0;
    const end = this.top - bytes.length;
    const addr = end - (end % 64); // (not `& ~63`: these addresses do not fit an int32)
    if (this.readsBodies || mustRead || addr < mem().length + TOKEN_MARGIN) return this.copy(bytes);
    this.top = addr;
    this.tokens.push({ addr, bytes });
    return addr;
  }
  // The caller's bytes behind a borrowed piece at a placeholder address, or null.
  tokenBytes(p, n) {
    if (p < this.top) return null;
    let lo = 0;
    let hi = this.tokens.length - 1;
    while (lo <= hi) {
      // tokens are sorted by descending address
      const mid = (lo + hi) >> 1;
      const t = this.tokens[mid];
      if (p < t.addr) lo = mid + 1;
      else if (p >= t.addr + t.bytes.length) hi = mid - 1;
      else return t.bytes.subarray(p - t.addr, p - t.addr + n);
    }
    return null;
  }
  take(status) {
    check(status);
    const v = u32At(slot(0));
    this.values.push(v);
    return v;
  }
  tensor(t, mustRead = false) {
    t = asTensor(t);
    const code = dtypeInfo.get(t.dtype).code;
    return this.take(wasm.tenso_js_value_tensor(slot(0), this.body(t.bytes, mustRead), BigInt(t.nbytes),
      this.u64s(t.shape), t.shape.length, code));
  }
  value(x, depth) {
    if (x instanceof Tensor || (ArrayBuffer.isView(x) && !(x instanceof DataView))) return this.tensor(x);
    if (x instanceof StringTensor) return this.strings(x);
    if (x instanceof QuantizedTensor) return this.quantized(x);
    if (x instanceof SparseMatrix) return this.sparse(x);
    if (x instanceof RaggedArray) return this.ragged(x);
    if (x instanceof GpuIpcRef) return this.ipcRef(x);
    if (x instanceof Map || (x && typeof x === 'object' && [Object.prototype, null].includes(Object.getPrototypeOf(x)))) {
      if (isTensorLike(x)) return this.tensor(x);
      return this.bundle(x instanceof Map ? [...x] : Object.entries(x), depth);
    }
    throw new TensoTypeError(`Cannot serialize object of type '${describe(x)}'`);
  }
  bundle(entries, depth) {
    // The engine bounds nesting too; this only stops a cyclic object before the stack does.
    if (depth > C.MAX_DEPTH) throw new TensoLimitError(`Bundles nest deeper than ${C.MAX_DEPTH} levels`);
    const b = this.take(wasm.tenso_value_new_bundle(slot(0)));
    for (const [key, child] of entries) {
      if (typeof key !== 'string') throw new TensoTypeError('bundle keys must be strings');
      const k = encoder.encode(key);
      const kp = this.copy(k);
      const c = this.value(child, depth + 1);
      check(wasm.tenso_bundle_insert(b, kp, k.length, c));
    }
    return b;
  }
  strings(s) {
    const encoded = s.strings.map((x) => encoder.encode(x));
    const offsets = [0];
    for (const e of encoded) offsets.push(offsets[offsets.length - 1] + e.length);
    const payload = new Uint8Array(offsets[offsets.length - 1]);
    encoded.forEach((e, i) => payload.set(e, offsets[i]));
    return this.take(wasm.tenso_value_new_strings(slot(0), BigInt(encoded.length), this.u64s(offsets),
      this.copy(payload), BigInt(payload.length)));
  }
  quantized(q) {
    return this.take(wasm.tenso_js_value_quantized(slot(0), this.copy(q.data), BigInt(q.data.length), this.u64s(q.shape),
      q.shape.length, this.f32s(q.scales), this.f32s(q.zeroPoints), q.scales.length, dtypeCode(q.dtype),
      SCHEMES.get(q.scheme), q.axis, q.groupSize));
  }
  sparse(m) {
    // The engine checks the structure (reads the indices): components are copied in.
    const parts = m.components.map((t) => [this.copy(t.bytes), BigInt(t.nbytes), this.u64s([t.size]), dtypeCode(t.dtype)]);
    return this.take(wasm.tenso_js_value_sparse(slot(0), KIND_CODE.get(`sparse_${m.format}`), this.u64s(m.shape),
      ...parts[0], ...parts[1], ...parts[2]));
  }
  ragged(r) {
    const t = r.flat;
    return this.take(wasm.tenso_js_value_ragged(slot(0), this.body(t.bytes), BigInt(t.nbytes), this.u64s([t.size]),
      dtypeCode(t.dtype), BigInt(r.length), this.u64s(r.offsets)));
  }
  ipcRef(g) {
    return this.take(wasm.tenso_js_value_ipc_ref(slot(0), this.copy(g.handle), g.handle.length, this.copy(g.deviceUuid),
      g.deviceUuid.length, BigInt(g.byteOffset), BigInt(g.nbytes)));
  }
}

const KIND_CODE = new Map([...KIND].map(([code, name]) => [name, code]));
function dtypeCode(name) {
  const info = dtypeInfo.get(name);
  if (!info) throw new TensoValueError(`unknown dtype '${name}'`);
  return info.code;
}

/**
 * Encodes a value as a Tenso packet.
 *
 * @param value a Tensor or typed array (1-D), a plain object or Map of values (a bundle),
 *   SparseMatrix, QuantizedTensor, StringTensor, RaggedArray or GpuIpcRef.
 * @param options checkIntegrity (XXH3-64 footers), compress (LZ4 frames for dense bodies),
 *   alignment (a power of two, default 64), compressionLevel.
 * @returns the packet, a Uint8Array.
 */
export function dumps(value, options = {}) {
  const eo = encodeOptions(options);
  const enc = new Encoding(eo.flags !== 0);
  try {
    const v = enc.value(value, 0);
    const opts = eo.ptr();
    check(wasm.tenso_value_dumps_bound(slot(0), v, opts));
    const bound = u32At(slot(0));
    const out = new Uint8Array(bound);
    let pos = 0;
    setPieceSink((p, n, borrowed) => {
      if (pos + n > bound) return 1;
      const caller = borrowed ? enc.tokenBytes(p, n) : null;
      out.set(caller || mem().subarray(p, p + n), pos);
      pos += n;
      return 0;
    });
    check(wasm.tenso_js_write(rec, v, opts));
    // The bound is the worst case of compression: a packet much smaller than it gets a buffer of
    // its own size (one copy of the compressed packet) rather than keep all of the bound alive.
    return bound - pos > pos / 8 ? out.slice(0, pos) : out.subarray(0, pos);
  } finally {
    setPieceSink(null);
    enc.release();
  }
}

// ------------------------------------------------------------------------------------------
// Quantization and ragged arrays
// ------------------------------------------------------------------------------------------

/**
 * Quantizes a float32, float16 or bfloat16 tensor, bit-exact with upstream
 * QuantizedTensor.quantize.
 * @param options dtype ('qint8', 'quint8', 'qint4', 'quint4'), scheme ('per_tensor',
 *   'per_channel', 'per_group'), axis (per_channel), groupSize (per_group).
 */
export function quantize(tensor, { dtype = 'qint8', scheme = 'per_tensor', axis = 0, groupSize = 0 } = {}) {
  const t = asTensor(tensor);
  if (!SCHEMES.has(scheme)) throw new TensoValueError(`unknown quantization scheme '${scheme}'`);
  const enc = new Encoding(true);
  try {
    const v = enc.take(wasm.tenso_js_quantize(slot(0), enc.copy(t.bytes), BigInt(t.nbytes), enc.u64s(t.shape),
      t.shape.length, dtypeCode(t.dtype), dtypeCode(dtype), SCHEMES.get(scheme), axis, groupSize));
    check(wasm.tenso_js_value_quantized_record(rec, v));
    const [data, nbytes, scales, zps, , , , outAxis, outGroup, nscales] = Array.from({ length: 10 }, (_, i) => recAt(i));
    const m = mem();
    return new QuantizedTensor({ data: m.slice(data, data + nbytes), shape: [...t.shape], dtype, scheme, axis: outAxis,
      groupSize: outGroup, scales: new Float32Array(m.slice(scales, scales + 4 * nscales).buffer),
      zeroPoints: new Float32Array(m.slice(zps, zps + 4 * nscales).buffer) });
  } finally {
    enc.release();
  }
}

/** The float32 values of a quantized tensor, bit-exact with upstream dequantize. */
export function dequantize(q) {
  const count = numel(q.shape);
  const enc = new Encoding(true);
  const dst = malloc(4 * Math.max(count, 1));
  try {
    check(wasm.tenso_js_dequantize(dst, BigInt(count), enc.copy(q.data), BigInt(q.data.length), enc.u64s(q.shape),
      q.shape.length, enc.f32s(q.scales), enc.f32s(q.zeroPoints), q.scales.length, dtypeCode(q.dtype),
      SCHEMES.get(q.scheme), q.axis, q.groupSize));
    return new Tensor(new Float32Array(mem().slice(dst, dst + 4 * count).buffer), [...q.shape], 'float32');
  } finally {
    free(dst);
    enc.release();
  }
}

/** A ragged array from its packet: upstream's bundle form (or a direct ragged packet). */
export function loadsRagged(data, options = {}) {
  return withView(bytesOf(data), options, (v, ctx) => {
    if (KIND.get(wasm.tenso_view_kind(v)) === 'ragged') return convert(v, ctx, options);
    check(wasm.tenso_view_ragged(slot(0), slot(1), v));
    const flat = convert(u32At(slot(0)), ctx, options);
    const offsets = convert(u32At(slot(1)), ctx, { ...options, copy: true });
    return new RaggedArray(flat, Array.from(offsets.data, Number));
  });
}


/** The value of a view whose bytes are the engine's own (stream decoder): everything copied
 *  out; the view is freed. */
export function convertOwned(v, options = {}) {
  try {
    return convert(v, { src: null, base: 0 }, options);
  } finally {
    wasm.tenso_view_free(v);
  }
}
