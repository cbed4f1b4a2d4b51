// The README examples run: every ```js block of sdk/js/README.md and of the top README.md, as a
// module beside the tests (so `libtenso` is the packed package).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { repo } from './helpers.js';

for (const readme of ['sdk/js/README.md', 'README.md']) {
  const blocks = [...readFileSync(`${repo}/${readme}`, 'utf8').matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
  test(`${readme}: its JavaScript examples run`, () => {
    assert.ok(blocks.length >= 1, 'at least one example');
    blocks.forEach((code, i) => {
      const file = fileURLToPath(new URL(`./readme-example-${i}.mjs`, import.meta.url));
      writeFileSync(file, code);
      try {
        execFileSync(process.execPath, [file], { encoding: 'utf8' });
      } catch (e) {
        assert.fail(`${readme} example ${i}: ${e.stderr || e.message}`);
      } finally {
        rmSync(file, { force: true });
      }
    });
  });
}
