// http.js - tensors over HTTP, as tenso.serve / tenso.fastapi exchange them: bodies are one
// packet, content type application/octet-stream; responses carry X-Tenso-Version (and
// X-Tenso-Shape / X-Tenso-Dtype for tensors); a request body that is not a packet is answered
// 400 (content type), 413 (over a size limit) or 422 (malformed), with {"detail": ...}.
import { wasm } from './engine.js';
import { loads, dumps, decodeOptions } from './codec.js';
import { Decoder, chunksOf } from './stream.js';
import { TensoError, TensoHTTPError, TensoLimitError, TensoMemoryError } from './errors.js';
import { Tensor, asTensor } from './values.js';

export const MEDIA_TYPE = 'application/octet-stream';
/** The largest request body readTensorRequest accepts by default (2 GiB), as tenso.fastapi. */
export const MAX_BODY_BYTES = 2 * 2 ** 30;
const PROTOCOL = String(wasm.tenso_protocol_version());

function contentTypeOk(value) {
  return value != null && value.split(';', 1)[0].trim().toLowerCase() === MEDIA_TYPE;
}

// Python's str() of a shape tuple: "(2, 3)", "(5,)", "()".
function pyShape(shape) {
  return shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
}

async function detailOf(response) {
  const text = await response.text();
  try {
    const body = JSON.parse(text);
    if (body && body.detail !== undefined) return typeof body.detail === 'string' ? body.detail : JSON.stringify(body.detail);
  } catch {
    // not JSON: the text itself
  }
  return text;
}

// A response body as one Uint8Array, refused as soon as it passes `limit` bytes (0: no limit),
// whether or not the server declared its length: read into a buffer of the declared length
// (within the limit), growing by doubling past it. One copy of the body, as arrayBuffer().
async function readBody(response, limit) {
  const tooLarge = (n) => new TensoLimitError(`response of ${n} bytes exceeds maxPacketBytes (${limit})`);
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (limit && declared > limit) {
    await response.body?.cancel();
    throw tooLarge(declared);
  }
  if (!response.body) return new Uint8Array(0);
  let buf = new Uint8Array(Number.isSafeInteger(declared) && declared >= 0 ? Math.min(declared, limit || MAX_BODY_BYTES) : 1 << 16);
  let n = 0;
  for await (const chunk of chunksOf(response.body)) {
    if (limit && n + chunk.length > limit) {
      n = -1;
      break;
    }
    if (n + chunk.length > buf.length) {
      const grown = new Uint8Array(Math.max(2 * buf.length, n + chunk.length));
      grown.set(buf.subarray(0, n));
      buf = grown;
    }
    buf.set(chunk, n);
    n += chunk.length;
  }
  if (n < 0) {
    await response.body.cancel();
    throw tooLarge(`more than ${limit}`);
  }
  return buf.subarray(0, n);
}

/**
 * Decodes a fetch Response whose body is a packet (loads over its bytes: zero-copy).
 * Throws TensoHTTPError for a status other than 2xx (with the server's detail), TensoLimitError
 * when the body exceeds options.maxPacketBytes: at once for a larger Content-Length, else as
 * soon as that many bytes have arrived.
 */
export async function readTensorResponse(response, options = {}) {
  if (!response.ok) throw new TensoHTTPError(response.status, await detailOf(response));
  const type = response.headers.get('content-type');
  if (type != null && !contentTypeOk(type)) {
    await response.body?.cancel();
    throw new TensoHTTPError(response.status, `expected ${MEDIA_TYPE}, got ${type}`);
  }
  return loads(await readBody(response, options.maxPacketBytes || 0), options);
}

/**
 * fetch() for tenso endpoints: `init.tensor`, when given, is encoded (dumps, with
 * init.checkIntegrity) and POSTed as the body; the answer is decoded (readTensorResponse).
 */
export async function fetchTensor(url, init = {}, options = {}) {
  const { tensor, checkIntegrity, ...rest } = init;
  if (tensor !== undefined) {
    rest.method = rest.method ?? 'POST';
    rest.body = dumps(tensor, { checkIntegrity });
    rest.headers = new Headers(rest.headers);
    rest.headers.set('content-type', MEDIA_TYPE);
  }
  return readTensorResponse(await fetch(url, rest), options);
}

/**
 * A fetch Response holding `value` as one packet, with tenso.fastapi.TensoResponse's headers.
 * @param options checkIntegrity, filename (Content-Disposition), status, headers.
 */
export function tensorResponse(value, { checkIntegrity = false, filename, status = 200, headers } = {}) {
  const body = dumps(value, { checkIntegrity });
  const h = new Headers(headers);
  h.set('content-type', MEDIA_TYPE);
  h.set('content-length', String(body.length));
  h.set('x-tenso-version', PROTOCOL);
  if (value instanceof Tensor || (ArrayBuffer.isView(value) && !(value instanceof DataView))) {
    value = asTensor(value);
    h.set('x-tenso-shape', pyShape(value.shape));
    h.set('x-tenso-dtype', value.dtype);
  }
  if (filename) h.set('content-disposition', `attachment; filename="${filename}"`);
  return new Response(body, { status, headers: h });
}

/**
 * The body of a fetch Request as a tensor, checked as tenso.fastapi.get_tenso_data checks it:
 * TensoHTTPError 400 for another content type, 413 over maxBodyBytes (Content-Length, then the
 * packet's header, before its memory is allocated) or another size limit, 422 for a body that
 * is not one complete, valid packet. The body is decoded as it arrives (the push decoder).
 */
export async function readTensorRequest(request, { maxBodyBytes = MAX_BODY_BYTES, ...options } = {}) {
  if (!contentTypeOk(request.headers.get('content-type'))) {
    throw new TensoHTTPError(400, 'Expected application/octet-stream content type.');
  }
  const tooLarge = (n) => new TensoHTTPError(413,
    `Invalid Tenso packet: the body of ${n} bytes exceeds the limit of ${maxBodyBytes} bytes.`);
  const declared = request.headers.get('content-length');
  if (declared != null && /^\d+$/.test(declared) && Number(declared) > maxBodyBytes) throw tooLarge(Number(declared));
  const limit = options.maxPacketBytes ? Math.min(options.maxPacketBytes, maxBodyBytes) : maxBodyBytes;
  decodeOptions({ ...options, maxPacketBytes: limit }); // refuse bad options before reading
  const decoder = new Decoder({ ...options, maxPacketBytes: limit });
  let received = 0;
  let value;
  let done = false;
  try {
    for await (const chunk of request.body ? chunksOf(request.body) : []) {
      received += chunk.length;
      if (received > maxBodyBytes) throw tooLarge(received);
      if (!done) {
        const values = decoder.push(chunk);
        if (values.length) {
          value = values[0];
          done = true; // bytes after the packet are ignored, as loads ignores them
        }
      }
    }
    if (!done) {
      if (received === 0) throw new TensoHTTPError(422, 'Invalid Tenso packet: Packet too short (empty body).');
      decoder.finish();
      throw new TensoHTTPError(422, 'Invalid Tenso packet: the body ended inside the packet.');
    }
  } catch (e) {
    if (e instanceof TensoHTTPError || !(e instanceof TensoError)) throw e;
    const overLimit = e instanceof TensoMemoryError || (e instanceof TensoLimitError && e.statusName === 'TENSO_E_LIMIT');
    throw new TensoHTTPError(overLimit ? 413 : 422, `Invalid Tenso packet: ${e.message}`);
  } finally {
    decoder.close();
  }
  return value;
}

/**
 * A fetch-style handler (Request -> Response) for an endpoint as tenso.serve makes them:
 * `handler(tensor)` gets the decoded body and its result is sent back as a packet; bad bodies
 * are answered 400 / 413 / 422 with {"detail": ...}.
 */
export function tensorEndpoint(handler, { checkIntegrity = false, ...options } = {}) {
  return async (request) => {
    let value;
    try {
      value = await readTensorRequest(request, options);
    } catch (e) {
      if (!(e instanceof TensoHTTPError)) throw e;
      return Response.json({ detail: e.detail }, { status: e.httpStatus });
    }
    return tensorResponse(await handler(value), { checkIntegrity });
  };
}
