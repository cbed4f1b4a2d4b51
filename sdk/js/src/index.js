// libtenso for JavaScript: Tenso packets (protocol v4; v1-v3 read) in Node >= 20 and browsers,
// decided byte for byte by libtenso's own engine compiled to WebAssembly (tenso.wasm, shipped
// in this package and instantiated when it is imported).
import { wasm, cstr } from './engine.js';
import { dtypeInfo } from './values.js';

export { dumps, loads, packetInfo, quantize, dequantize, loadsRagged, limits } from './codec.js';
export { Decoder, decodeStream } from './stream.js';
export {
  fetchTensor, readTensorResponse, tensorResponse, readTensorRequest, tensorEndpoint, MEDIA_TYPE, MAX_BODY_BYTES,
} from './http.js';
export { Tensor, SparseMatrix, QuantizedTensor, StringTensor, RaggedArray, GpuIpcRef } from './values.js';
export * from './errors.js';

/** The engine's version ("1.5.0"): libtenso's, which this package's version follows. */
export const version = cstr(wasm.tenso_version_string());
/** The wire protocol version written: 4. */
export const protocolVersion = wasm.tenso_protocol_version();
/** Every dtype the engine knows, by name: { code, itemsize, bits, kind }. */
export const dtypes = Object.freeze(Object.fromEntries([...dtypeInfo].map(([k, v]) => [k, Object.freeze({ ...v })])));
