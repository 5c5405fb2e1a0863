// The relay's image as a team runs it: podman runs the image `cargo xtask dist` built (runc,
// host network, this project's containers.conf) against a throwaway PostgreSQL. It is healthy
// and ready, serves the built app and nothing else of the repository, runs as its own user,
// `owner add` inside it prints a link, and the web app's main flow in Chromium against the
// container answers a call from the released plugin.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { freeAddress, tempDir, pairPlugin, McpClient } from '../harness.mjs';
import { servingTab } from './tab.mjs';

const run = promisify(execFile);
const IMAGE = process.env.SEALPOST_IMAGE;
const DATABASE = process.env.SEALPOST_TEST_POSTGRES_URL;
const podman = (args) => run('podman', args, { env: process.env });

let base;
const name = `sealpost-relay-check-${process.pid}`;

before(async () => {
  assert.ok(IMAGE, 'SEALPOST_IMAGE names the image to run');
  assert.ok(DATABASE, 'SEALPOST_TEST_POSTGRES_URL names a throwaway database');
  const listen = await freeAddress();
  base = `http://${listen}`;
  await podman(['--runtime', 'runc', 'run', '-d', '--rm', '--network=host', '--name', name,
    '-e', `SEALPOST_LISTEN=${listen}`, '-e', `SEALPOST_DATABASE_URL=${DATABASE}`,
    '-e', `SEALPOST_PUBLIC_URL=${base}`, '-e', 'SEALPOST_METRICS_LISTEN=off', IMAGE]);
  // Ready when /readyz answers; a bound on the wait, not a measure of it.
  for (let tries = 0; ; tries++) {
    const ready = await fetch(`${base}/readyz`).then((r) => r.status === 200, () => false);
    if (ready) break;
    if (tries > 600) {
      const { stdout, stderr } = await podman(['logs', name]).catch((e) => e);
      throw new Error(`the container never became ready:\n${stdout}${stderr}`);
    }
    await new Promise((ok) => setTimeout(ok, 100));
  }
});

after(async () => {
  await podman(['stop', '-t', '5', name]).catch(() => {});
});

// What a browser needs from the relay to run the app, and what it must not be given.
export async function checkServedApp(at) {
  const wants = [
    ['/', 'text/html'],
    ['/app.js', 'javascript'],
    ['/sealpost/sealpost.js', 'javascript'],
    ['/sealpost/worker.js', 'javascript'],
    ['/sealpost/pkg/sealpost_browser.js', 'javascript'],
    ['/sealpost/pkg/sealpost_browser_bg.wasm', 'application/wasm'],
  ];
  for (const [path, type] of wants) {
    const response = await fetch(`${at}${path}`);
    assert.equal(response.status, 200, `${path} is served`);
    assert.ok(response.headers.get('content-type')?.includes(type), `${path} is ${type}: ${response.headers.get('content-type')}`);
  }
  for (const path of ['/tests/harness.mjs', '/bench/web.mjs', '/package.json', '/package-lock.json', '/node_modules/.package-lock.json']) {
    assert.equal((await fetch(`${at}${path}`)).status, 404, `${path} is not served`);
  }
}

test('the image is healthy and ready, and serves the built app and nothing else', async () => {
  assert.equal((await fetch(`${base}/healthz`)).status, 200);
  assert.equal((await fetch(`${base}/readyz`)).status, 200);
  await checkServedApp(base);
  await podman(['exec', name, '/usr/local/bin/sealpost-relay', 'healthcheck']);
  const { stdout } = await podman(['image', 'inspect', '--format', '{{.Config.User}}', IMAGE]);
  assert.equal(stdout.trim(), '10001:10001', 'the image runs as its own user, not root');
});

test('the health check fails when nothing answers', async () => {
  await assert.rejects(
    podman(['exec', '-e', 'SEALPOST_LISTEN=127.0.0.1:1', name, '/usr/local/bin/sealpost-relay', 'healthcheck']),
    'a relay that does not answer is unhealthy',
  );
});

test('owner add in the container prints a link, and its web app serves a call from the plugin', async () => {
  const { stdout } = await podman(['exec', name, '/usr/local/bin/sealpost-relay', 'owner', 'add', 'alice']);
  const link = stdout.match(/https?:\/\/\S+#signin=\S+/)?.[0];
  assert.ok(link?.startsWith(base), stdout);
  const tab = await servingTab(link);
  try {
    const config = tempDir('sealpost-image-plugin-');
    const paired = await pairPlugin(config, tab.code);
    assert.equal(paired.status, 0, paired.output);
    const mcp = new McpClient(config);
    await mcp.initialize();
    const found = await mcp.call('search_workspace', { query: 'rotation' });
    mcp.close();
    assert.equal(found.isError, false, found.text);
    assert.ok(found.text.includes('Key rotation'), found.text);
  } finally {
    await tab.close();
  }
});
