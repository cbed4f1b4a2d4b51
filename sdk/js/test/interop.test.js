// Interop both ways with the Python SDK (TENSO_SDK_PYTHON: libtenso natively) and upstream tenso
// 0.24.0 (TENSO_UPSTREAM_PYTHON): their packets decode here and re-encode to the same bytes; our
// packets decode there (interop.py read; for upstream also tests/upstream/decode_ours.py, the
// golden set's own checker) and are the bytes they write.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as tenso from 'libtenso';
import { repo, manifest, valueOf, assertMatches, hex } from './helpers.js';

const script = fileURLToPath(new URL('./interop.py', import.meta.url));
const pythons = [['the Python SDK', process.env.TENSO_SDK_PYTHON], ['upstream tenso 0.24.0', process.env.TENSO_UPSTREAM_PYTHON]];

function encodeOptions(o) {
  return { checkIntegrity: !!o.check_integrity, compress: !!o.compress, alignment: o.alignment ?? 0 };
}

for (const [who, python] of pythons) {
  test(`${who}: its packets decode here, and re-encode to its bytes`, () => {
    assert.ok(python, `no interpreter for ${who} (sdk/js/run-tests.sh sets TENSO_SDK_PYTHON / TENSO_UPSTREAM_PYTHON)`);
    const dir = mkdtempSync(join(tmpdir(), 'tenso-js-from-py-'));
    try {
      execFileSync(python, [script, 'write', dir], { stdio: ['ignore', 'inherit', 'inherit'] });
      const names = readdirSync(dir).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5));
      assert.ok(names.length >= 25, `${names.length} packets`);
      for (const name of names) {
        const spec = JSON.parse(readFileSync(join(dir, `${name}.json`), 'utf8'));
        const packet = readFileSync(join(dir, `${name}.tenso`));
        const v = spec.value;
        assertMatches(v.kind === 'ragged' ? tenso.loadsRagged(packet) : tenso.loads(packet), v, `${who} ${name}`);
        if (!spec.compressed) {
          const ours = tenso.dumps(valueOf(v), encodeOptions(spec.options));
          assert.equal(hex(ours), hex(packet), `${who} ${name}: our bytes differ from theirs`);
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test(`${who}: our packets of every golden case decode there, to the same bytes`, () => {
    assert.ok(python, `no interpreter for ${who}`);
    const dir = mkdtempSync(join(tmpdir(), 'tenso-js-to-py-'));
    try {
      let n = 0;
      for (const c of manifest().cases) {
        // What upstream writes and reads (not the handmade legacy packets and GPU references).
        if (c.producer !== 'upstream' || !c.upstream_reads) continue;
        const options = encodeOptions({ ...c.options, compress: c.compressed });
        writeFileSync(join(dir, `${c.name}.tenso`), tenso.dumps(valueOf(c.value), options));
        writeFileSync(join(dir, `${c.name}.json`), JSON.stringify({ value: c.value, options: c.options, compressed: c.compressed }));
        n++;
      }
      assert.ok(n >= 80, `${n} cases`);
      const out = execFileSync(python, [script, 'read', dir], { encoding: 'utf8' });
      assert.match(out, new RegExp(`^${n} passed, 0 failed$`, 'm'), out);
      if (who.startsWith('upstream')) {
        const check = execFileSync(python, [join(repo, 'tests/upstream/decode_ours.py'), dir], { encoding: 'utf8' });
        assert.match(check, /^\d+ passed, 0 failed/m, check);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
