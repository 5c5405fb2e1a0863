// The page's API is written in three places that must agree: the class in sealpost.js, the
// Worker's `methods` table in worker.js that it forwards to, and the declarations in
// sealpost.d.ts. The Worker's table is the one the others follow: every forwarded call names
// one of its methods, every method of it is reached, and every public method of the class is
// declared, with nothing declared that the class lacks. No browser: the files are read as text.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const js = resolve(dirname(fileURLToPath(import.meta.url)), '../../crates/browser/js');
const read = (name) => readFileSync(join(js, name), 'utf8');

// The text of the block that starts at `opening` (a line ending in `{`), up to its closing `}`
// at the start of a line.
function block(text, opening) {
  const start = text.indexOf(opening);
  assert.ok(start >= 0, `${opening} is there`);
  const end = text.indexOf('\n}', start);
  return text.slice(start + opening.length, end);
}

// Names of the members declared at the block's first indentation level (two spaces).
function members(body) {
  return [...body.matchAll(/^ {2}(?:static )?(?:async )?([A-Za-z]\w*)\s*[(<]/gm)].map((m) => m[1]);
}

// The class's own plumbing: not part of the page's API.
const PLUMBING = new Set(['constructor', 'receive', 'dispatch', 'warn', 'runTool', 'call', 'remember']);
// Worker methods the class reaches without `this.call` (a tool's result is posted directly).
const POSTED = new Set(['toolResult']);

const workerMethods = new Set(members(block(read('worker.js'), 'const methods = {')));
const classBody = block(read('sealpost.js'), 'export class Sealpost {');
// Forwarded by the class, and by the WebMCP bridge through the class (`tab.call`).
const forwarded = new Set([classBody, read('webmcp.js')].flatMap((text) => [...text.matchAll(/\.call\('(\w+)'/g)].map((m) => m[1])));
const classApi = new Set(members(classBody).filter((name) => !PLUMBING.has(name)));
const declared = new Set(members(block(read('sealpost.d.ts'), 'export declare class Sealpost {')));

test('every call the page forwards names a method of the Worker, and every Worker method is reached', () => {
  assert.ok(workerMethods.size > 25, `read ${workerMethods.size} Worker methods`);
  assert.deepEqual([...forwarded].filter((name) => !workerMethods.has(name)), [], 'forwarded to no Worker method');
  const reached = new Set([...forwarded, ...POSTED, 'open']);
  assert.deepEqual([...workerMethods].filter((name) => !reached.has(name)), [], 'Worker methods the page never calls');
});

test('sealpost.d.ts declares exactly the public methods of the class', () => {
  assert.ok(classApi.size > 30, `read ${classApi.size} methods of the class`);
  assert.deepEqual([...classApi].filter((name) => !declared.has(name)), [], 'methods sealpost.d.ts does not declare');
  assert.deepEqual([...declared].filter((name) => !classApi.has(name)), [], 'declared, but the class has no such method');
});
