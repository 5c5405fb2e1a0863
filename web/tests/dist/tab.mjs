// What the release checks share: the artifacts' folder, a tab of the web app serving a
// session in Chromium (signed in, one source imported, every tool granted), and the official
// TypeScript MCP SDK's client over stdio, as Claude Desktop, Cursor and VS Code run it.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { grantAllAndServe, launchBrowser, openPage, writeFolder } from '../harness.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const DIST = process.env.SEALPOST_DIST_DIR ?? join(root, 'target/dist');
export const VERSION = process.env.SEALPOST_VERSION ?? '0.1.0';

// Opens `signinUrl` in a fresh Chromium, imports a note, grants every tool and starts a
// session; answers the pairing code, the fingerprint the tab shows, and `close()`.
export async function servingTab(signinUrl) {
  const browser = await launchBrowser();
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await openPage(context, signinUrl);
  await page.waitForSelector('#nav:not([hidden])');
  const notes = writeFolder({ 'notes/rotation.md': '# Key rotation\nRotate the signing keys every ninety days.\n' });
  await page.fill('#source-name', 'notes');
  await page.setInputFiles('#pick-folder', join(notes, 'notes'));
  await page.waitForSelector('#import-status:text("Imported 1 files into notes.")');
  const code = await grantAllAndServe(page, 'notes');
  const fingerprint = (await page.textContent('#fingerprint')).trim();
  assert.deepEqual(page.cspViolations, [], 'the app runs under its CSP');
  return { code, fingerprint, page, close: () => browser.close() };
}

// The official SDK's client on `command args…` over stdio; `env` for the process (HOME, the
// config folder). Answers the connected client; the time to the first `tools/list` is in
// `listedAfterMs`.
export async function sdkClient(command, args, env) {
  const started = performance.now();
  const transport = new StdioClientTransport({ command, args, env: { PATH: process.env.PATH, ...env }, stderr: 'inherit' });
  const client = new Client({ name: 'sealpost-release-check', version: '1' });
  await client.connect(transport);
  const { tools } = await client.listTools();
  client.listedAfterMs = performance.now() - started;
  client.firstTools = tools;
  return client;
}

// A real call through the relay to the tab: the imported note is found.
export async function searchFinds(client) {
  const answer = await client.callTool({ name: 'search_workspace', arguments: { query: 'rotation' } });
  const text = answer.content.map((c) => c.text).join('\n');
  assert.equal(answer.isError ?? false, false, text);
  assert.ok(text.includes('Key rotation'), text);
}

// Runs `command args…` with only PATH and `env`, `stdin` written and closed; resolves to its
// exit status and everything it printed.
export function run(command, args, env, stdin = '') {
  return new Promise((ok) => {
    const child = spawn(command, args, { env: { PATH: process.env.PATH, ...env } });
    let output = '';
    child.stdout.on('data', (d) => { output += d; });
    child.stderr.on('data', (d) => { output += d; });
    child.on('exit', (status) => ok({ status, output }));
    child.stdin.end(stdin);
  });
}
