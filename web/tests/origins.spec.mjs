// A host app on its own origin: the browser module served by the app's own server (another
// loopback port), speaking to a relay that lists that origin with `--app-origin`. The whole
// loop works from there, over the session channel; a page of an origin the relay does not list
// is refused, over HTTP and on the channel.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { join, extname, normalize, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  startRelay, launchBrowser, openPage, tempDir, pairPlugin, McpClient, WEB_DIR,
} from './harness.mjs';

const HOST_FIXTURE = join(dirname(fileURLToPath(import.meta.url)), 'host');
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.svg': 'image/svg+xml' };

// A host app's own static server: the fixture page at `/`, the built module under `/sealpost/`
// (and the favicon the fixture names).
async function appServer() {
  const server = createServer(async (request, response) => {
    const path = normalize(decodeURIComponent(new URL(request.url, 'http://x').pathname));
    const fromBuild = path.startsWith('/sealpost/') || path === '/favicon.svg';
    const file = fromBuild ? join(WEB_DIR, path) : join(HOST_FIXTURE, path === '/' ? 'index.html' : path);
    if (!resolve(file).startsWith(resolve(fromBuild ? WEB_DIR : HOST_FIXTURE))) {
      response.writeHead(404).end();
      return;
    }
    try {
      const body = await readFile(file);
      response.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(body);
    } catch {
      response.writeHead(404).end();
    }
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return { origin: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((ok) => server.close(ok)) };
}

let browser;
let app;
let stranger;
let relay;

before(async () => {
  browser = await launchBrowser();
  app = await appServer();
  stranger = await appServer();
  relay = await startRelay({ args: ['--app-origin', app.origin] });
});

after(async () => {
  await browser?.close();
  await relay?.stop();
  await app?.close();
  await stranger?.close();
});

async function hostPage(origin) {
  const context = await browser.newContext();
  const page = await openPage(context, `${origin}/`);
  page.on('pageerror', (error) => page.consoleErrors.push(error.message));
  await page.waitForSelector('html[data-ready="yes"]');
  return page;
}

test('a host app on a listed origin serves its tools through the relay, over the session channel', async () => {
  const page = await hostPage(app.origin);
  const ownerToken = await relay.ownerToken();
  const code = await page.evaluate(async ({ ownerToken, relayOrigin }) => {
    const tab = await window.openTab({ ownerToken, relayOrigin, workspace: 'app' });
    window.tab = tab;
    await tab.registerTool({ name: 'app_greet', description: 'Greets.', inputSchema: { type: 'object' }, kind: 'read' }, () => 'hello from the app');
    await tab.setGrants({ access: 'on', sources: [], tools: ['app_greet'] });
    const started = await tab.startSession(3600);
    tab.serve();
    return started.pairingCode;
  }, { ownerToken, relayOrigin: relay.base });
  await page.waitForFunction(() => window.tab.events.some((e) => e.type === 'ready'), null, { timeout: 10_000 });
  const config = tempDir('sealpost-origins-plugin-');
  const paired = await pairPlugin(config, code);
  assert.equal(paired.status, 0, paired.output);
  const mcp = new McpClient(config);
  await mcp.initialize();
  const greeted = await mcp.call('app_greet');
  assert.equal(greeted.isError, false, greeted.text);
  assert.ok(greeted.text.includes('hello from the app'), greeted.text);
  const transports = await page.evaluate(() => window.tab.events.filter((e) => e.type === 'transport').map((e) => e.transport));
  assert.deepEqual(transports, ['channel'], 'the channel opens from a listed origin');
  mcp.close();
  assert.deepEqual(page.consoleErrors, []);
});

test('a page of an origin the relay does not list is refused, over HTTP and on the channel', async () => {
  const page = await hostPage(stranger.origin);
  const ownerToken = await relay.ownerToken();
  const outcome = await page.evaluate(async ({ ownerToken, relayOrigin }) => {
    const tab = await window.openTab({ ownerToken, relayOrigin, workspace: 'stranger' });
    let started = null;
    let code = null;
    try {
      await tab.startSession(3600);
      started = 'started';
    } catch (error) {
      started = `refused: ${error.message}`;
      code = error.code;
    }
    // Signing in from here fails for the same cause, and says the same.
    const signIn = await window.Sealpost.signIn('no-such-code', relayOrigin).then(() => 'signed in', (error) => `${error.name} ${error.code}`);
    const channel = await new Promise((done) => {
      const socket = new WebSocket(`${relayOrigin.replace('http', 'ws')}/v1/channel`, ['sealpost.v1', `sealpost.bearer.${ownerToken}`]);
      socket.onopen = () => { socket.close(); done('opened'); };
      socket.onerror = () => done('refused');
    });
    return { started, code, signIn, channel };
  }, { ownerToken, relayOrigin: relay.base });
  assert.match(outcome.started, /^refused/, 'no session from an unlisted origin');
  assert.match(outcome.started, /does not list this page's origin http:\/\/127\.0\.0\.1:\d+: its operator adds it with --app-origin/, 'the error names the likely cause');
  assert.equal(outcome.channel, 'refused', 'no channel from an unlisted origin');
  assert.equal(outcome.code, 'origin_not_allowed', 'a code names the cause, apart from a relay that is down');
  assert.equal(outcome.signIn, 'AuthError origin_not_allowed');
});

test('a relay that is down is told apart from one that does not list the origin: code network, for a session and a sign-in', async () => {
  const away = await startRelay({ args: ['--app-origin', app.origin] });
  const page = await hostPage(app.origin);
  const ownerToken = await away.ownerToken();
  await page.evaluate(async ({ ownerToken, relayOrigin }) => {
    window.tab = await window.openTab({ ownerToken, relayOrigin, workspace: 'away' });
  }, { ownerToken, relayOrigin: away.base });
  await away.down();
  try {
    const outcome = await page.evaluate(async (relayOrigin) => ({
      session: await window.tab.startSession(3600).then(() => 'started', (error) => error.code),
      signIn: await window.Sealpost.signIn('no-such-code', relayOrigin).then(() => 'signed in', (error) => `${error.name} ${error.code}`),
    }), away.base);
    assert.deepEqual(outcome, { session: 'network', signIn: 'AuthError network' });
  } finally {
    await away.up();
    await away.stop();
  }
});
