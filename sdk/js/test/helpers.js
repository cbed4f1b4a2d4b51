// Test helpers: the golden vectors' manifest values as JavaScript values, and a deep comparison
// of decoded values with them.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as tenso from 'libtenso';

export const repo = fileURLToPath(new URL('../../..', import.meta.url)).replace(/\/$/, '');
export const vectorsDir = process.env.TENSO_VECTORS_DIR || `${repo}/tests/vectors`;
export const manifest = () => JSON.parse(readFileSync(`${vectorsDir}/manifest.json`, 'utf8'));

export const hex = (b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
export const unhex = (h) => new Uint8Array(Buffer.from(h, 'hex'));
const f32 = (h) => new Float32Array(unhex(h).buffer);

/** The JavaScript value of a manifest value (what dumps takes). */
export function valueOf(v) {
  switch (v.kind) {
    case 'dense':
      return tenso.Tensor.fromBytes(unhex(v.body_hex), v.shape, v.dtype);
    case 'bundle': {
      const out = {};
      for (const e of v.entries) {
        Object.defineProperty(out, e.key, { value: valueOf(e.value), enumerable: true, writable: true, configurable: true });
      }
      return out;
    }
    case 'sparse_coo':
    case 'sparse_csr':
    case 'sparse_csc':
      return new tenso.SparseMatrix(v.kind.slice(7), v.shape, ...v.components.map(valueOf));
    case 'quantized':
      return new tenso.QuantizedTensor({ data: unhex(v.body_hex), shape: v.shape, dtype: v.dtype, scheme: v.scheme,
        axis: v.axis, groupSize: v.group_size, scales: f32(v.scales_hex), zeroPoints: f32(v.zero_points_hex) });
    case 'string':
      return new tenso.StringTensor(v.strings);
    case 'ragged': {
      const rows = v.rows_hex.map((h) => tenso.Tensor.fromBytes(unhex(h), null, v.dtype).data);
      const offsets = [0];
      for (const n of v.row_lengths) offsets.push(offsets[offsets.length - 1] + n);
      const flat = tenso.Tensor.fromBytes(unhex(v.rows_hex.join('')), [offsets[offsets.length - 1]], v.dtype);
      assert.equal(rows.length, v.row_lengths.length);
      return new tenso.RaggedArray(flat, offsets);
    }
    case 'gpu_ipc_ref':
      return new tenso.GpuIpcRef({ handle: unhex(v.handle_hex), deviceUuid: unhex(v.uuid_hex), byteOffset: v.byte_offset,
        nbytes: v.nbytes });
    default:
      throw new Error(`unknown manifest kind ${v.kind}`);
  }
}

/** Asserts that a decoded value is the manifest value v. */
export function assertMatches(got, v, what) {
  switch (v.kind) {
    case 'dense':
      assert.ok(got instanceof tenso.Tensor, `${what}: a Tensor`);
      assert.equal(got.dtype, v.dtype, `${what}: dtype`);
      assert.deepEqual(got.shape, v.shape, `${what}: shape`);
      assert.equal(hex(got.bytes), v.body_hex, `${what}: body`);
      return;
    case 'bundle':
      assert.deepEqual(Object.keys(got), [...new Set(v.entries.map((e) => e.key))], `${what}: keys`);
      for (const e of v.entries) assertMatches(got[e.key], e.value, `${what}.${e.key}`);
      return;
    case 'sparse_coo':
    case 'sparse_csr':
    case 'sparse_csc':
      assert.ok(got instanceof tenso.SparseMatrix, `${what}: a SparseMatrix`);
      assert.equal(got.format, v.kind.slice(7));
      assert.deepEqual(got.shape, v.shape);
      got.components.forEach((c, i) => assertMatches(c, v.components[i], `${what}[${i}]`));
      return;
    case 'quantized':
      assert.ok(got instanceof tenso.QuantizedTensor, `${what}: a QuantizedTensor`);
      assert.equal(hex(got.data), v.body_hex, `${what}: data`);
      assert.deepEqual([got.dtype, got.scheme, got.axis, got.groupSize], [v.dtype, v.scheme, v.axis, v.group_size]);
      assert.deepEqual(got.shape, v.shape);
      assert.equal(hex(got.scales), v.scales_hex, `${what}: scales`);
      assert.equal(hex(got.zeroPoints), v.zero_points_hex, `${what}: zero points`);
      assert.equal(hex(tenso.dequantize(got).bytes), v.dequant_hex, `${what}: dequantized`);
      return;
    case 'string':
      assert.ok(got instanceof tenso.StringTensor, `${what}: a StringTensor`);
      assert.deepEqual(got.strings, v.strings);
      return;
    case 'ragged':
      assert.ok(got instanceof tenso.RaggedArray, `${what}: a RaggedArray`);
      assert.equal(got.dtype, v.dtype);
      assert.deepEqual(got.rows().map((r) => hex(r)), v.rows_hex);
      return;
    case 'gpu_ipc_ref':
      assert.ok(got instanceof tenso.GpuIpcRef, `${what}: a GpuIpcRef`);
      assert.deepEqual([hex(got.handle), hex(got.deviceUuid), got.byteOffset, got.nbytes],
        [v.handle_hex, v.uuid_hex, v.byte_offset, v.nbytes]);
      return;
    default:
      throw new Error(`unknown manifest kind ${v.kind}`);
  }
}
