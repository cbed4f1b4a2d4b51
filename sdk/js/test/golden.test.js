// The shared golden vectors (tests/vectors, written by upstream tenso 0.24.0): every file
// decodes to its manifest value, and every uncompressed v4 case encodes to the file byte for
// byte from that value and the case's options.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as tenso from 'libtenso';
import { vectorsDir, manifest, valueOf, assertMatches, hex } from './helpers.js';

const cases = manifest().cases;

test('the manifest has every kind', () => {
  const kinds = new Set(cases.map((c) => c.value.kind));
  for (const k of ['dense', 'bundle', 'sparse_coo', 'sparse_csr', 'sparse_csc', 'quantized', 'string', 'ragged', 'gpu_ipc_ref']) {
    assert.ok(kinds.has(k), k);
  }
  assert.ok(cases.length >= 90, `${cases.length} cases`);
});

for (const c of cases) {
  const file = readFileSync(`${vectorsDir}/${c.file}`);
  test(`decode ${c.name}`, () => {
    const got = c.value.kind === 'ragged' ? tenso.loadsRagged(file) : tenso.loads(file);
    assertMatches(got, c.value, c.name);
    if (c.value.kind === 'ragged') assertMatches(tenso.loads(file), c.value.bundle, c.name + ' (bundle)');
    // Arrays from an aligned buffer are views of it, never copies.
    if (c.value.kind === 'dense' && !c.compressed && got.data.length) {
      const at = file.byteOffset + tenso.packetInfo(file).bodyOffset;
      assert.equal(got.data.buffer === file.buffer, at % got.data.BYTES_PER_ELEMENT === 0, 'a view exactly when aligned');
    }
  });
  if (!c.compressed && c.version === 4) {
    test(`encode ${c.name}`, () => {
      const o = c.options;
      const out = tenso.dumps(valueOf(c.value), { checkIntegrity: o.check_integrity, alignment: o.alignment });
      assert.equal(hex(out), hex(file), `${c.name}: bytes differ from upstream's`);
    });
  }
  if (c.compressed) {
    test(`re-encode ${c.name} compressed`, () => {
      const o = c.options;
      const out = tenso.dumps(valueOf(c.value), { compress: true, checkIntegrity: o.check_integrity, alignment: o.alignment });
      assertMatches(tenso.loads(out), c.value, c.name);
    });
  }
}

test('packetInfo agrees with the manifest', () => {
  for (const c of cases.filter((x) => x.value.kind === 'dense')) {
    const info = tenso.packetInfo(readFileSync(`${vectorsDir}/${c.file}`));
    assert.equal(info.kind, 'dense');
    assert.equal(info.dtype, c.value.dtype, c.name);
    assert.deepEqual(info.shape, c.value.shape, c.name);
    assert.equal(info.packetSize, c.size, c.name);
    assert.equal(info.version, c.version, c.name);
  }
});
