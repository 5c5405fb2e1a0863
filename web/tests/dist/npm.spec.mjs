// The plugin as npm users get it: `npx -y @sealpost/plugin pair` and `… mcp` with an empty
// HOME and npm cache, from a registry holding only what `cargo xtask dist` packed, driven by
// the official TypeScript SDK through the released relay to a tab in Chromium.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRelay, tempDir } from '../harness.mjs';
import { DIST, servingTab, sdkClient, searchFinds, run } from './tab.mjs';
import { startRegistry } from './registry.mjs';

let relay;
let tab;
let registry;

before(async () => {
  relay = await startRelay();
  tab = await servingTab(relay.signinUrl);
  registry = await startRegistry(DIST);
});

after(async () => {
  await tab?.close();
  await relay?.stop();
  registry?.close();
});

// A person's machine: its own HOME and npm cache, npm pointed at the registry.
function machine() {
  const home = tempDir('sealpost-npx-home-');
  return {
    HOME: home,
    npm_config_cache: `${home}/.npm`,
    npm_config_registry: registry.url,
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
  };
}

function npx(args, env, stdin = '') {
  return run('npx', ['-y', '@sealpost/plugin', ...args], env, stdin);
}

test('npx installs the launcher and this platform\'s binary, pairs, lists and answers a call', async () => {
  const env = machine();
  const paired = await npx(['pair'], env, `${tab.code}\n`);
  assert.equal(paired.status, 0, paired.output);
  assert.ok(paired.output.includes(tab.fingerprint), `the plugin shows the tab's fingerprint: ${paired.output}`);
  const platformPackage = `@sealpost/plugin-${process.platform}-${process.arch}`;
  assert.ok(registry.requested.includes(platformPackage), `npm fetched ${platformPackage}: ${registry.requested}`);

  const client = await sdkClient('npx', ['-y', '@sealpost/plugin', 'mcp'], env);
  try {
    console.log(`npx to the first tools/list (installed): ${client.listedAfterMs.toFixed(0)} ms`);
    const names = client.firstTools.map((t) => t.name);
    assert.ok(names.includes('search_workspace'), names.join(', '));
    await searchFinds(client);
  } finally {
    await client.close();
  }
});

test('a cold npx (empty cache) reaches its first tools/list', async () => {
  const env = machine();
  const client = await sdkClient('npx', ['-y', '@sealpost/plugin', 'mcp'], env);
  try {
    console.log(`npx to the first tools/list (empty cache): ${client.listedAfterMs.toFixed(0)} ms`);
    assert.ok(client.firstTools.some((t) => t.name === 'sealpost_status'));
  } finally {
    await client.close();
  }
});

test('without the platform package the launcher says what to do and exits 1', async () => {
  const env = { ...machine(), npm_config_omit: 'optional' };
  const run = await npx(['--version'], env, '');
  assert.equal(run.status, 1, run.output);
  assert.match(run.output, /no plugin binary for .* was installed/);
});
