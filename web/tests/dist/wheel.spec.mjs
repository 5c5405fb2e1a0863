// The plugin as Python users get it: `uvx sealpost pair` and `uvx sealpost mcp` from the
// wheels `cargo xtask dist` made (no index: only those files), and `pip install` into a fresh
// virtual environment, each with an empty HOME, driven by the official TypeScript SDK through
// the released relay to a tab in Chromium.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { startRelay, tempDir } from '../harness.mjs';
import { DIST, servingTab, sdkClient, searchFinds, run } from './tab.mjs';

const UVX = process.env.SEALPOST_UVX ?? 'uvx';
const UVX_ARGS = ['--no-index', '--find-links', DIST, 'sealpost'];

let relay;
let tab;

before(async () => {
  relay = await startRelay();
  tab = await servingTab(relay.signinUrl);
});

after(async () => {
  await tab?.close();
  await relay?.stop();
});

function machine() {
  const home = tempDir('sealpost-uvx-home-');
  return { HOME: home, UV_CACHE_DIR: `${home}/.cache/uv`, UV_PYTHON_DOWNLOADS: 'never', UV_NO_PROGRESS: '1' };
}


test('uvx runs the wheel\'s plugin: pairs, lists and answers a call', async () => {
  const env = machine();
  const paired = await run(UVX, [...UVX_ARGS, 'pair'], env, `${tab.code}\n`);
  assert.equal(paired.status, 0, paired.output);
  assert.ok(paired.output.includes(tab.fingerprint), paired.output);
  const client = await sdkClient(UVX, [...UVX_ARGS, 'mcp'], env);
  try {
    console.log(`uvx to the first tools/list (installed): ${client.listedAfterMs.toFixed(0)} ms`);
    assert.ok(client.firstTools.some((t) => t.name === 'search_workspace'));
    await searchFinds(client);
  } finally {
    await client.close();
  }
});

test('pip installs the wheel into a fresh virtual environment and its `sealpost` serves', async () => {
  const env = machine();
  const venv = join(env.HOME, 'venv');
  execFileSync('python3', ['-m', 'venv', venv]);
  const wheel = readdirSync(DIST).find((f) => f.endsWith('.whl') && f.includes(process.arch === 'arm64' ? 'aarch64' : 'x86_64') && f.includes('linux'));
  assert.ok(wheel, 'a wheel for this machine');
  execFileSync(join(venv, 'bin/pip'), ['install', '--quiet', '--no-index', join(DIST, wheel)], { env: { ...process.env, ...env } });
  const installed = join(venv, 'bin/sealpost');
  const paired = await run(installed, ['pair'], env, `${tab.code}\n`);
  assert.equal(paired.status, 0, paired.output);
  const client = await sdkClient(installed, ['mcp'], env);
  try {
    await searchFinds(client);
  } finally {
    await client.close();
  }
});
