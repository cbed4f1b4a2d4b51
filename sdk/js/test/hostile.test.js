// Hostile bytes: the C hostile suite's own table of crafted packets (tests/capi/CapiHostileTest,
// written out by that suite: TENSO_HOSTILE_CASES) must give the same status here, as the error
// class for it; every truncation of every golden vector is a TensoTruncatedError; seeded random
// mutations decode or throw a TensoError, never anything else, and never hang. loads decodes
// dense packets from their header alone (tenso_js_loads_dense): every input here is also
// decoded whole by tenso_loads in the same engine, which must say exactly the same.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import * as tenso from 'libtenso';
import { vectorsDir, unhex } from './helpers.js';

// The engine module the package itself runs (same instance), for tenso_loads on whole packets.
const engine = await import(new URL('./node_modules/libtenso/src/engine.js', import.meta.url));

// tenso_loads of the whole packet in engine memory: "TENSO_OK" or "STATUS: message".
function whole(bytes, decodeOptions) {
  const p = engine.copyIn(bytes);
  try {
    const st = engine.wasm.tenso_loads(engine.slot(0), p, bytes.length, decodeOptions);
    if (st === 0) {
      engine.wasm.tenso_view_free(engine.u32At(engine.slot(0)));
      return 'TENSO_OK';
    }
    return `${engine.cstr(engine.wasm.tenso_status_name(st))}: ${engine.cstr(engine.wasm.tenso_last_error())}`;
  } finally {
    engine.free(p);
  }
}
// loads as the package runs it: "TENSO_OK" or "STATUS: message".
function viaLoads(bytes, options) {
  try {
    tenso.loads(bytes, options);
    return 'TENSO_OK';
  } catch (e) {
    if (!(e instanceof tenso.TensoError)) throw e;
    return `${e.statusName}: ${e.message}`;
  }
}
const defaults = () => engine.wasm.tenso_js_decode_options(0, 0, 0, 0n, 0n, 0n, 0n) >>> 0;

const CLASS_OF = {
  TENSO_E_TRUNCATED: tenso.TensoTruncatedError,
  TENSO_E_CHECKSUM: tenso.TensoChecksumError,
  TENSO_E_BAD_MAGIC: tenso.TensoCorruptError,
  TENSO_E_MALFORMED: tenso.TensoCorruptError,
  TENSO_E_BAD_BUNDLE: tenso.TensoCorruptError,
  TENSO_E_COMPRESSION: tenso.TensoCorruptError,
  TENSO_E_UNSUPPORTED_VERSION: tenso.TensoUnsupportedError,
  TENSO_E_BAD_DTYPE: tenso.TensoUnsupportedError,
  TENSO_E_UNSUPPORTED_KIND: tenso.TensoUnsupportedError,
  TENSO_E_TOO_MANY_DIMS: tenso.TensoLimitError,
  TENSO_E_TOO_MANY_ELEMENTS: tenso.TensoLimitError,
  TENSO_E_LIMIT: tenso.TensoLimitError,
  TENSO_E_INVALID_ARGUMENT: tenso.TensoValueError,
  TENSO_E_NO_MEMORY: tenso.TensoMemoryError,
};

const table = process.env.TENSO_HOSTILE_CASES;

test('the C hostile table is given (TENSO_HOSTILE_CASES)', () => {
  assert.ok(table, 'set TENSO_HOSTILE_CASES to the JSON CapiHostileTest writes (sdk/js/run-tests.sh does)');
});

if (table) {
  const cases = JSON.parse(readFileSync(table, 'utf8'));
  test(`the C hostile table: ${cases.length} crafted packets, the same statuses`, () => {
    assert.ok(cases.length >= 100, `${cases.length} cases`);
    for (const c of cases) {
      const o = c.options || {};
      const options = {
        skipChecksum: o.skip_checksum, validateUtf8: o.validate_utf8, maxNdim: o.max_ndim, maxDepth: o.max_depth,
        maxElements: o.max_elements, maxPacketBytes: o.max_packet_bytes, maxDecodedBytes: o.max_decoded_bytes,
        maxEntries: o.max_entries,
      };
      const bytes = unhex(c.hex);
      if (c.loads === 'TENSO_OK') {
        tenso.loads(bytes, options);
        continue;
      }
      assert.throws(() => tenso.loads(bytes, options), (e) => {
        assert.equal(e.statusName, c.loads, `${c.name}: ${e.statusName} (${e.message}), wanted ${c.loads}`);
        assert.ok(e instanceof CLASS_OF[c.loads], `${c.name}: ${e.constructor.name} for ${c.loads}`);
        assert.ok(e.message.length > 0, `${c.name}: a message`);
        return true;
      }, c.name);
    }
  });
}

const golden = readdirSync(vectorsDir).filter((f) => f.endsWith('.tenso')).map((f) => [f, readFileSync(`${vectorsDir}/${f}`)]);

test('every truncation of every golden vector is a TensoTruncatedError', () => {
  let n = 0;
  for (const [name, pkt] of golden) {
    // As the C suite: the three vectors over 2 KiB are sampled (first KiB, last 128 bytes, a stride).
    for (let k = 0; k < pkt.length; k++) {
      if (pkt.length > 2048 && !(k < 1024 || k + 128 >= pkt.length || k % 211 === 0)) continue;
      n++;
      const prefix = pkt.subarray(0, k);
      assert.throws(() => tenso.loads(prefix), (e) => e instanceof tenso.TensoTruncatedError, `${name} prefix ${k}`);
      assert.equal(viaLoads(prefix), whole(prefix, defaults()), `${name} prefix ${k}: loads and a whole decode differ`);
    }
  }
  assert.ok(n > 5000, `${n} prefixes`);
});

test('seeded random mutations decode or throw a TensoError', () => {
  let seed = 0x9e3779b9;
  const rand = () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 2 ** 32;
  };
  let tries = 0;
  for (const [name, pkt] of golden) {
    for (let i = 0; i < 25; i++) {
      const m = Uint8Array.from(pkt);
      const flips = 1 + Math.floor(rand() * 3);
      for (let j = 0; j < flips; j++) m[Math.floor(rand() * m.length)] = Math.floor(rand() * 256);
      tries++;
      const got = viaLoads(m, { maxDecodedBytes: 64 << 20 });
      const want = whole(m, engine.wasm.tenso_js_decode_options(0, 0, 0, 0n, 0n, BigInt(64 << 20), 0n) >>> 0);
      assert.equal(got, want, `${name} mutation ${i}: loads and a whole decode differ`);
      // The stream decoder over the same bytes, in small pieces.
      const d = new tenso.Decoder({ maxDecodedBytes: 64 << 20 });
      try {
        const step = m.length < 512 ? 7 : 4096;
        for (let o = 0; o < m.length; o += step) d.push(m.subarray(o, o + step));
      } catch (e) {
        assert.ok(e instanceof tenso.TensoError, `${name} mutation ${i} (stream): ${e}`);
      } finally {
        d.close();
      }
    }
  }
  assert.ok(tries >= 2000, `${tries} mutations`);
});
