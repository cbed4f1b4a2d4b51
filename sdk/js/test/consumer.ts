// A TypeScript consumer of libtenso, type-checked by types.test.js (tsc --strict): the
// declarations describe the API the tests exercise.
import * as tenso from 'libtenso';
import { Tensor, StringTensor, TensoChecksumError, type Decoded, type PacketInfo } from 'libtenso';

const t: Tensor<Float32Array> = new Tensor(new Float32Array(6), [2, 3]);
const packet: Uint8Array = tenso.dumps({ weights: t, names: new StringTensor(['a']) }, { checkIntegrity: true });
const back: Decoded = tenso.loads(packet, { maxPacketBytes: 1 << 20, copy: false });
if (back instanceof Tensor) {
  const shape: number[] = back.shape;
  void shape;
}
const info: PacketInfo = tenso.packetInfo(packet);
const size: number = info.packetSize + tenso.limits.maxNdim;
const q = tenso.quantize(t, { dtype: 'qint4', scheme: 'per_group', groupSize: 3 });
const f: Float32Array = tenso.dequantize(q).data;

async function stream(body: ReadableStream<Uint8Array>): Promise<number> {
  let n = 0;
  for await (const v of tenso.decodeStream(body, { maxEntries: 10 })) if (v instanceof Tensor) n += v.size;
  return n;
}
async function http(): Promise<Response> {
  const x = await tenso.fetchTensor('http://127.0.0.1:8000/double', { tensor: t });
  return tenso.tensorResponse(x as Tensor, { checkIntegrity: true });
}
const handler: (r: Request) => Promise<Response> = tenso.tensorEndpoint((v) => v);
try {
  tenso.loads(packet);
} catch (e) {
  if (e instanceof TensoChecksumError) console.log(e.statusName, e.message);
}
void [size, f, stream, http, handler, tenso.version, tenso.dtypes.bfloat16.itemsize];
