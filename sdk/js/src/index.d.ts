// Type declarations of libtenso: Tenso packets in Node >= 20 and browsers, decided by libtenso's
// own engine compiled to WebAssembly.

/** Names of the dtypes the engine knows (see `dtypes`). */
export type DtypeName =
  | 'float32' | 'int32' | 'float64' | 'int64' | 'uint8' | 'uint16' | 'bool' | 'float16' | 'int8' | 'int16'
  | 'uint32' | 'uint64' | 'complex64' | 'complex128' | 'bfloat16' | 'qint8' | 'quint8' | 'qint4' | 'quint4'
  | 'string' | 'bytes';
export type QuantizedDtype = 'qint8' | 'quint8' | 'qint4' | 'quint4';
export type QuantScheme = 'per_tensor' | 'per_channel' | 'per_group';
export type KindName =
  | 'dense' | 'bundle' | 'sparse_coo' | 'sparse_csr' | 'sparse_csc' | 'quantized' | 'string' | 'ragged' | 'gpu_ipc_ref';

/** The typed arrays tensors hold: complex dtypes as interleaved (re, im) lanes; float16 as a
 *  Float16Array where the runtime has one, else its bits in a Uint16Array; bfloat16 as its bits;
 *  bool as bytes of 0 or 1. */
export type TypedArray =
  | Float32Array | Float64Array | Int8Array | Int16Array | Int32Array | BigInt64Array | Uint8Array
  | Uint8ClampedArray | Uint16Array | Uint32Array | BigUint64Array;

export type Bytes = ArrayBuffer | SharedArrayBuffer | ArrayBufferView;

/** A dense tensor: C-contiguous elements with a dtype and a shape. */
export class Tensor<A extends TypedArray = TypedArray> {
  constructor(data: A, shape?: number[], dtype?: DtypeName);
  /** A tensor whose elements are a copy of `bytes` (little-endian, C order). */
  static fromBytes(bytes: Uint8Array, shape: number[] | null, dtype: DtypeName): Tensor;
  readonly dtype: DtypeName;
  readonly shape: number[];
  readonly data: A;
  readonly ndim: number;
  /** Element count. */
  readonly size: number;
  readonly nbytes: number;
  /** The elements' bytes (a view, no copy). */
  readonly bytes: Uint8Array;
}

/** A sparse matrix, as scipy's: COO (data, row, col), CSR / CSC (data, indices, indptr). */
export class SparseMatrix {
  constructor(format: 'coo' | 'csr' | 'csc', shape: [number, number] | number[], data: Tensor | TypedArray,
    a: Tensor | TypedArray, b: Tensor | TypedArray);
  readonly format: 'coo' | 'csr' | 'csc';
  readonly shape: number[];
  readonly data: Tensor;
  readonly row?: Tensor;
  readonly col?: Tensor;
  readonly indices?: Tensor;
  readonly indptr?: Tensor;
  readonly components: [Tensor, Tensor, Tensor];
  readonly nnz: number;
}

export interface QuantizedParts {
  data: Uint8Array;
  shape: number[];
  dtype: QuantizedDtype;
  scheme?: QuantScheme;
  axis?: number;
  groupSize?: number;
  scales: ArrayLike<number>;
  zeroPoints: ArrayLike<number>;
}
/** A quantized tensor (upstream's QuantizedTensor): packed integers, float32 scales and zero points. */
export class QuantizedTensor {
  constructor(parts: QuantizedParts);
  readonly data: Uint8Array;
  readonly shape: number[];
  readonly dtype: QuantizedDtype;
  readonly scheme: QuantScheme;
  readonly axis: number;
  readonly groupSize: number;
  readonly scales: Float32Array;
  readonly zeroPoints: Float32Array;
}

/** A tensor of UTF-8 strings. */
export class StringTensor {
  constructor(strings: string[]);
  readonly strings: string[];
  readonly length: number;
  readonly shape: [number];
}

/** Rows of different lengths: row i is flat[offsets[i] .. offsets[i + 1]). */
export class RaggedArray {
  constructor(flat: Tensor | TypedArray, offsets: ArrayLike<number | bigint>);
  static fromRows(rows: TypedArray[]): RaggedArray;
  readonly flat: Tensor;
  readonly offsets: number[];
  readonly length: number;
  readonly dtype: DtypeName;
  row(i: number): TypedArray;
  rows(): TypedArray[];
}

/** A GPU IPC reference packet: where another process finds device memory. */
export class GpuIpcRef {
  constructor(parts: { handle: ArrayLike<number>; byteOffset: number; nbytes: number; deviceUuid: ArrayLike<number> });
  readonly handle: Uint8Array;
  readonly byteOffset: number;
  readonly nbytes: number;
  readonly deviceUuid: Uint8Array;
}

/** What dumps takes. Plain objects and Maps are bundles (string keys, up to 255 entries). */
export type Value =
  | Tensor | TypedArray | SparseMatrix | QuantizedTensor | StringTensor | RaggedArray | GpuIpcRef
  | Map<string, Value> | { [key: string]: Value };
/** What loads returns. */
export type Decoded = Tensor | SparseMatrix | QuantizedTensor | StringTensor | RaggedArray | GpuIpcRef | Bundle;
export interface Bundle {
  [key: string]: Decoded;
}

export interface EncodeOptions {
  /** Append an XXH3-64 footer to every body. */
  checkIntegrity?: boolean;
  /** LZ4-frame-compress dense bodies. */
  compress?: boolean;
  /** Body alignment, a power of two up to 2^20; default 64. */
  alignment?: number;
  /** LZ4 level; 0 = fast. */
  compressionLevel?: number;
}

/** Decode limits: 0 (the default) is the protocol's own limit (see `limits`); a limit can only
 *  make decoding stricter. */
export interface DecodeOptions {
  maxPacketBytes?: number;
  maxDecodedBytes?: number;
  maxEntries?: number;
  maxNdim?: number;
  maxElements?: number;
  maxDepth?: number;
  /** Do not verify integrity footers. */
  skipChecksum?: boolean;
  /** Check that string payloads are UTF-8. */
  validateUtf8?: boolean;
}

export interface LoadOptions extends DecodeOptions {
  /** Tensors that own their memory instead of views of the input: over shared memory, the bytes
   *  the integrity footer was checked against. */
  copy?: boolean;
  /** false: throw TensoValueError instead of copying a body a typed array cannot view
   *  (one not aligned for its element type in the input). Default true. */
  align?: boolean;
}

/** Encodes a value as one Tenso packet. */
export function dumps(value: Value, options?: EncodeOptions): Uint8Array;
/** Decodes a packet (trailing bytes ignored); dense bodies are views of `data` when aligned. */
export function loads(data: Bytes, options?: LoadOptions): Decoded;
/** A ragged array from its packet (upstream's bundle form, or a direct ragged packet). */
export function loadsRagged(data: Bytes, options?: LoadOptions): RaggedArray;

export interface PacketInfo {
  version: number;
  flags: number;
  kind: KindName;
  dtype: DtypeName | null;
  ndim: number;
  shape: number[];
  entryCount: number;
  alignment: number;
  bodyOffset: number;
  bodySize: number;
  /** 0 when the bytes given are too few to tell. */
  packetSize: number;
  integrity: boolean;
  compressed: boolean;
}
/** What a packet's header says, without decoding its body. */
export function packetInfo(data: Bytes): PacketInfo;

/** Quantizes a float32, float16 or bfloat16 tensor, bit-exact with upstream. */
export function quantize(tensor: Tensor | TypedArray,
  options?: { dtype?: QuantizedDtype; scheme?: QuantScheme; axis?: number; groupSize?: number }): QuantizedTensor;
/** The float32 values of a quantized tensor, bit-exact with upstream. */
export function dequantize(q: QuantizedTensor): Tensor<Float32Array>;

/** The protocol's limits and defaults, from the C ABI. */
export const limits: Readonly<{
  maxNdim: number;
  maxElements: number;
  maxDepth: number;
  maxBundleEntries: number;
  maxKeyBytes: number;
  defaultAlignment: number;
  maxAlignment: number;
}>;
/** The engine's version ("1.5.0"). */
export const version: string;
/** The wire protocol version written (4). */
export const protocolVersion: number;
/** Every dtype the engine knows. */
export const dtypes: Readonly<Record<DtypeName, Readonly<{ code: number; itemsize: number; bits: number; kind: KindName }>>>;

/** A push decoder (libtenso's tenso_decoder): feed chunks, get the packets they complete. */
export class Decoder {
  constructor(options?: LoadOptions);
  push(chunk: Bytes): Decoded[];
  readonly idle: boolean;
  readonly needed: number;
  finish(): void;
  reset(): void;
  close(): void;
}
/** Every packet of a web ReadableStream, a Node Readable or an (async) iterable of chunks. */
export function decodeStream(
  source: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array> | Iterable<Uint8Array>, options?: LoadOptions,
): AsyncGenerator<Decoded, void, undefined>;

export const MEDIA_TYPE: 'application/octet-stream';
export const MAX_BODY_BYTES: number;
export interface FetchTensorInit extends RequestInit {
  /** Encoded (dumps) and POSTed as the body. */
  tensor?: Value;
  checkIntegrity?: boolean;
}
/** fetch() for tenso endpoints: sends init.tensor (if any), decodes the answer. */
export function fetchTensor(url: string | URL, init?: FetchTensorInit, options?: LoadOptions): Promise<Decoded>;
/** Decodes a Response whose body is a packet; TensoHTTPError for non-2xx statuses. */
export function readTensorResponse(response: Response, options?: LoadOptions): Promise<Decoded>;
/** A Response holding the value as a packet, with tenso.fastapi.TensoResponse's headers. */
export function tensorResponse(value: Value,
  options?: { checkIntegrity?: boolean; filename?: string; status?: number; headers?: HeadersInit }): Response;
/** A Request's body as a tensor, refused as tenso.fastapi does (TensoHTTPError 400, 413, 422). */
export function readTensorRequest(request: Request, options?: LoadOptions & { maxBodyBytes?: number }): Promise<Decoded>;
/** A fetch-style handler for a tenso endpoint: decoded body in, result out as a packet. */
export function tensorEndpoint(handler: (value: Decoded) => Value | Promise<Value>,
  options?: LoadOptions & { maxBodyBytes?: number; checkIntegrity?: boolean }): (request: Request) => Promise<Response>;

/** Base class of every tenso error: `statusName` is the C status ("TENSO_E_CHECKSUM"). */
export class TensoError extends Error {
  /** The status name an error of this class raised by the JavaScript layer carries
   *  (TensoValueError: "TENSO_E_INVALID_ARGUMENT", TensoLimitError: "TENSO_E_LIMIT", ...). */
  static readonly defaultStatus: string;
  constructor(message: string, statusName?: string, status?: number);
  readonly statusName: string;
  readonly status: number | undefined;
}
export class TensoValueError extends TensoError {}
export class TensoCorruptError extends TensoValueError {}
export class TensoTruncatedError extends TensoCorruptError {}
export class TensoChecksumError extends TensoCorruptError {}
export class TensoUnsupportedError extends TensoValueError {}
export class TensoLimitError extends TensoValueError {}
export class TensoTypeError extends TensoError {}
export class TensoEOFError extends TensoError {}
export class TensoMemoryError extends TensoError {}
export class TensoInternalError extends TensoError {}
export class TensoHTTPError extends TensoError {
  constructor(httpStatus: number, detail: string);
  readonly httpStatus: number;
  readonly detail: string;
}
/** The error class for a libtenso status name. */
export function errorFor(statusName: string, message: string, status?: number): TensoError;
