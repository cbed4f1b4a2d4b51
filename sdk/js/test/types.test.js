// The TypeScript declarations (src/index.d.ts, shipped in the package) type-check a consumer
// (consumer.ts) under tsc --strict with Node's ESM resolution.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

test('a TypeScript consumer type-checks against the packed declarations', () => {
  const here = fileURLToPath(new URL('.', import.meta.url));
  const tsc = fileURLToPath(new URL('./node_modules/typescript/bin/tsc', import.meta.url));
  const args = ['--noEmit', '--strict', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext',
    '--lib', 'es2022,dom,dom.iterable,dom.asynciterable', '--types', '', 'consumer.ts'];
  let out = '';
  try {
    out = execFileSync(process.execPath, [tsc, ...args], { cwd: here, encoding: 'utf8' });
  } catch (e) {
    assert.fail(`tsc: ${e.stdout}${e.stderr}`);
  }
  assert.equal(out.trim(), '');
});
