// The Windows plugin (`cargo xtask dist`'s x86_64-pc-windows-gnu build) under Wine: pairs
// with the code the tab shows, answers `initialize` and `tools/list` to the official
// TypeScript SDK, and a real call through the released relay on loopback to a tab in Chromium.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startRelay, tempDir } from '../harness.mjs';
import { DIST, VERSION, servingTab, sdkClient, searchFinds, run } from './tab.mjs';

const WINE = process.env.SEALPOST_WINE ?? '/usr/lib/wine/wine64';

let relay;
let tab;
let exe;

before(async () => {
  relay = await startRelay();
  tab = await servingTab(relay.signinUrl);
  const unpacked = tempDir('sealpost-win-');
  execFileSync('unzip', ['-q', join(DIST, `sealpost-${VERSION}-win32-x64.zip`), '-d', unpacked]);
  exe = join(unpacked, `sealpost-${VERSION}-win32-x64`, 'sealpost.exe');
});

after(async () => {
  await tab?.close();
  await relay?.stop();
});

// Wine's own folder (made once per run by xtask, `SEALPOST_WINEPREFIX`) and a config folder
// the Windows program names by its drive letter (Wine maps Z: to /).
function machine() {
  const config = tempDir('sealpost-win-config-');
  mkdirSync(config, { recursive: true });
  return {
    HOME: process.env.HOME,
    WINEPREFIX: process.env.SEALPOST_WINEPREFIX ?? join(process.env.HOME, '.wine'),
    WINEDEBUG: '-all',
    SEALPOST_CONFIG_DIR: `Z:${config.replaceAll('/', '\\')}`,
  };
}

function wine(args, env, stdin = '') {
  return run(WINE, [exe, ...args], env, stdin);
}

test('the Windows plugin pairs, lists and answers a call through the relay', async () => {
  const env = machine();
  const paired = await wine(['pair'], env, `${tab.code}\n`);
  assert.equal(paired.status, 0, paired.output);
  assert.ok(paired.output.includes(tab.fingerprint), `the plugin shows the tab's fingerprint: ${paired.output}`);
  const client = await sdkClient(WINE, [exe, 'mcp'], env);
  try {
    assert.equal(client.getServerVersion()?.name, 'sealpost');
    const names = client.firstTools.map((t) => t.name);
    assert.ok(names.includes('search_workspace'), names.join(', '));
    await searchFinds(client);
  } finally {
    await client.close();
  }
});
