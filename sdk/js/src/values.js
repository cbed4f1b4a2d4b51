// values.js - the JavaScript shapes of what packets hold: Tensor (dense), SparseMatrix,
// QuantizedTensor, StringTensor, RaggedArray, GpuIpcRef. Dtype facts (names, sizes, kinds) are
// the engine's (dtypeInfo); which typed array holds a dtype's elements is JavaScript's own.
import { dtypeTable, constant } from './engine.js';
import { TensoTypeError, TensoValueError } from './errors.js';

/** Every dtype the engine knows, by name: { code, itemsize, bits, kind }. */
export const dtypeInfo = new Map(dtypeTable().map((d) => [d.name, d]));
export const dtypeByCode = new Map([...dtypeInfo.values()].map((d) => [d.code, d]));

const Float16 = globalThis.Float16Array;
// The typed array holding a dense dtype's elements: complex dtypes as interleaved (re, im)
// lanes, float16 as Float16Array where the runtime has one (else its bits in a Uint16Array),
// bfloat16 as its bits, bool as bytes of 0 or 1.
const ARRAY_FOR = {
  float32: Float32Array,
  float64: Float64Array,
  float16: Float16 || Uint16Array,
  bfloat16: Uint16Array,
  complex64: Float32Array,
  complex128: Float64Array,
  int8: Int8Array,
  int16: Int16Array,
  int32: Int32Array,
  int64: BigInt64Array,
  uint8: Uint8Array,
  uint16: Uint16Array,
  uint32: Uint32Array,
  uint64: BigUint64Array,
  bool: Uint8Array,
};
// The dtype a bare typed array is sent as.
const DTYPE_OF = new Map([
  [Float32Array, 'float32'],
  [Float64Array, 'float64'],
  [Int8Array, 'int8'],
  [Int16Array, 'int16'],
  [Int32Array, 'int32'],
  [BigInt64Array, 'int64'],
  [Uint8Array, 'uint8'],
  [Uint8ClampedArray, 'uint8'],
  [Uint16Array, 'uint16'],
  [Uint32Array, 'uint32'],
  [BigUint64Array, 'uint64'],
]);
if (Float16) DTYPE_OF.set(Float16, 'float16');

/** The typed-array constructor for a dense dtype's elements. */
export function arrayType(dtype) {
  const info = dtypeInfo.get(dtype);
  const Ctor = ARRAY_FOR[dtype];
  if (!info || info.kind !== 'dense' || !Ctor) throw new TensoValueError(`not a dense dtype: ${dtype}`);
  return Ctor;
}

function checkShape(shape) {
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw new TensoValueError(`shape must be an array of non-negative integers, got ${JSON.stringify(shape)}`);
  }
  return shape;
}

/** Elements of a shape (1 for a scalar). */
export function numel(shape) {
  return shape.reduce((a, b) => a * b, 1);
}

/**
 * A dense tensor: C-contiguous elements in a typed array, with its dtype and shape.
 *
 * `new Tensor(new Float32Array(6), [2, 3])`; the dtype defaults to the typed array's
 * (Float32Array: float32, ...); give it for the tagged ones: `new Tensor(bits, [4], 'bfloat16')`.
 */
export class Tensor {
  constructor(data, shape = undefined, dtype = undefined) {
    if (!ArrayBuffer.isView(data) || data instanceof DataView) {
      throw new TensoTypeError('Tensor data must be a typed array');
    }
    this.dtype = dtype ?? DTYPE_OF.get(data.constructor);
    if (!this.dtype) throw new TensoTypeError(`no dtype for a ${data.constructor.name}: give one`);
    const info = dtypeInfo.get(this.dtype);
    if (!info || info.kind !== 'dense') throw new TensoValueError(`not a dense dtype: ${this.dtype}`);
    this.shape = checkShape(shape ?? [data.byteLength / info.itemsize]);
    this.data = data;
  }
  /** A tensor whose elements are a copy of `bytes` (little-endian, C order). */
  static fromBytes(bytes, shape, dtype) {
    const Ctor = arrayType(dtype);
    const data = new Ctor(bytes.byteLength / Ctor.BYTES_PER_ELEMENT);
    new Uint8Array(data.buffer).set(bytes);
    return new Tensor(data, shape, dtype);
  }
  get ndim() {
    return this.shape.length;
  }
  /** Element count. */
  get size() {
    return numel(this.shape);
  }
  get nbytes() {
    return this.data.byteLength;
  }
  /** The bytes of the elements (a view, no copy). */
  get bytes() {
    return new Uint8Array(this.data.buffer, this.data.byteOffset, this.data.byteLength);
  }
}

/** A plain { data: typed array, shape: number[], dtype: string } object, taken as a Tensor. */
export function isTensorLike(x) {
  return x != null && typeof x === 'object' && ArrayBuffer.isView(x.data) && Array.isArray(x.shape) &&
    typeof x.dtype === 'string';
}

/** A tensor from anything dumps takes as one: a Tensor, or a bare typed array (1-D). */
export function asTensor(x) {
  if (x instanceof Tensor) return x;
  if (ArrayBuffer.isView(x) && !(x instanceof DataView)) return new Tensor(x);
  if (isTensorLike(x)) return new Tensor(x.data, x.shape, x.dtype);
  throw new TensoTypeError(`expected a tensor, got ${describe(x)}`);
}

export function describe(x) {
  if (x === null) return 'null';
  if (typeof x !== 'object') return typeof x;
  return x.constructor ? x.constructor.name : 'object';
}

/**
 * A sparse matrix (scipy's coo / csr / csc): `data` and two index tensors, 1-D.
 * COO: a = row, b = col. CSR: a = indices (columns), b = indptr (rows + 1). CSC: a = indices
 * (rows), b = indptr (columns + 1). Indices are int32 or int64, as scipy holds them.
 */
export class SparseMatrix {
  constructor(format, shape, data, a, b) {
    if (!['coo', 'csr', 'csc'].includes(format)) throw new TensoValueError('Unknown sparse format');
    this.format = format;
    this.shape = checkShape(shape);
    this.data = asTensor(data);
    if (format === 'coo') {
      this.row = asTensor(a);
      this.col = asTensor(b);
    } else {
      this.indices = asTensor(a);
      this.indptr = asTensor(b);
    }
  }
  /** The three components in wire order. */
  get components() {
    return this.format === 'coo' ? [this.data, this.row, this.col] : [this.data, this.indices, this.indptr];
  }
  get nnz() {
    return this.data.size;
  }
}

export const SCHEMES = new Map([
  ['per_tensor', constant('TENSO_QUANT_PER_TENSOR')],
  ['per_channel', constant('TENSO_QUANT_PER_CHANNEL')],
  ['per_group', constant('TENSO_QUANT_PER_GROUP')],
]);
export const SCHEME_NAMES = new Map([...SCHEMES].map(([k, v]) => [v, k]));

/**
 * A quantized tensor (upstream's QuantizedTensor): packed integers (1 byte per element, or for
 * qint4 / quint4 two per byte, low nibble first) with float32 scales and zero points.
 * Element i is (q_i - zeroPoints[k]) * scales[k]: k = 0 (per_tensor), the index along `axis`
 * (per_channel), or i / groupSize (per_group). Make one with quantize(tensor, options).
 */
export class QuantizedTensor {
  constructor({ data, shape, dtype, scheme = 'per_tensor', axis = 0, groupSize = 0, scales, zeroPoints }) {
    this.data = data instanceof Uint8Array ? data : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    this.shape = checkShape(shape);
    this.dtype = dtype;
    if (!SCHEMES.has(scheme)) throw new TensoValueError(`unknown quantization scheme '${scheme}'`);
    this.scheme = scheme;
    this.axis = axis;
    this.groupSize = groupSize;
    this.scales = Float32Array.from(scales);
    this.zeroPoints = Float32Array.from(zeroPoints);
  }
}

/** A tensor of UTF-8 strings (dtype "string"). */
export class StringTensor {
  constructor(strings) {
    if (!Array.isArray(strings) || !strings.every((s) => typeof s === 'string')) {
      throw new TensoTypeError('StringTensor takes an array of strings');
    }
    this.strings = strings;
  }
  get length() {
    return this.strings.length;
  }
  get shape() {
    return [this.strings.length];
  }
}

/**
 * Rows of different lengths, of one dtype: `flat` holds every row, concatenated; row i is
 * flat[offsets[i] .. offsets[i + 1]). `RaggedArray.fromRows([...])` builds one.
 */
export class RaggedArray {
  constructor(flat, offsets) {
    this.flat = asTensor(flat);
    this.offsets = Array.from(offsets, Number);
  }
  static fromRows(rows) {
    const Ctor = rows.length ? rows[0].constructor : Float32Array;
    const offsets = [0];
    for (const r of rows) offsets.push(offsets[offsets.length - 1] + r.length);
    const flat = new Ctor(offsets[offsets.length - 1]);
    rows.forEach((r, i) => flat.set(r, offsets[i]));
    return new RaggedArray(flat, offsets);
  }
  get length() {
    return this.offsets.length - 1;
  }
  get dtype() {
    return this.flat.dtype;
  }
  /** Row i, a view of `flat`. */
  row(i) {
    return this.flat.data.subarray(this.offsets[i], this.offsets[i + 1]);
  }
  rows() {
    return Array.from({ length: this.length }, (_, i) => this.row(i));
  }
}

/** Where another process finds device memory: a GPU IPC reference packet (106 bytes). */
export class GpuIpcRef {
  constructor({ handle, byteOffset, nbytes, deviceUuid }) {
    this.handle = Uint8Array.from(handle);
    this.byteOffset = byteOffset;
    this.nbytes = nbytes;
    this.deviceUuid = Uint8Array.from(deviceUuid);
  }
}
