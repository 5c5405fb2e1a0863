// The npm package as a host app uses it: examples/host-app/ installs the tarball that
// `cargo xtask package` packed, Vite builds it, and the built app is served from its own
// loopback origin under the CSP docs/HOST.md names. The relay lists that origin; Chromium
// signs in from the link the operator prints for the app (`owner link NAME --app ORIGIN`),
// grants the app's tools and starts a session, and the real plugin calls them over stdio.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, extname, normalize, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  startRelay, launchBrowser, openPage, tempDir, pairPlugin, McpClient, screenshotPath, api,
} from './harness.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const EXAMPLE = join(root, 'examples/host-app');
const DIST = join(EXAMPLE, 'dist');
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm' };

// The tarball xtask passes, or the one `cargo xtask package` left in target/npm/.
function tarball() {
  if (process.env.SEALPOST_NPM_TARBALL) return process.env.SEALPOST_NPM_TARBALL;
  const dir = join(root, 'target/npm');
  let found = [];
  try { found = readdirSync(dir).filter((name) => /^sealpost-browser-.*\.tgz$/.test(name)); } catch { /* none */ }
  if (found.length !== 1) throw new Error(`expected one sealpost-browser-*.tgz in ${dir}, found ${found.length}: run \`cargo xtask package\``);
  return join(dir, found[0]);
}

function run(program, args, cwd) {
  return new Promise((ok, fail) => execFile(program, args, { cwd, maxBuffer: 16 << 20 }, (error, stdout, stderr) => (
    error ? fail(new Error(`${program} ${args.join(' ')} failed in ${cwd}:\n${stdout}${stderr}`)) : ok(stdout)
  )));
}

// The example as a newcomer builds it: its pinned packages, the packed module, Vite.
async function buildExample() {
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major < 20 || (major === 20 && minor < 19)) {
    throw new Error(`Vite 7 (examples/host-app) needs Node.js 20.19 or newer; this is ${process.versions.node}`);
  }
  await run('npm', ['ci', '--no-audit', '--no-fund'], EXAMPLE);
  await run('npm', ['install', '--no-save', '--no-audit', '--no-fund', tarball()], EXAMPLE);
  await run(process.execPath, ['node_modules/vite/bin/vite.js', 'build', '--logLevel', 'warn'], EXAMPLE);
}

// The app's own static server: the built dist/ under a strict CSP that lets the page reach
// its relay alone. Remembers what it served, with the type it served it as, and what it did
// not find.
async function appServer() {
  const served = [];
  const missing = [];
  const server = createServer(async (request, response) => {
    const path = normalize(decodeURIComponent(new URL(request.url, 'http://x').pathname));
    const file = join(DIST, path === '/' ? 'index.html' : path);
    if (!resolve(file).startsWith(resolve(DIST))) {
      missing.push(path);
      response.writeHead(404).end();
      return;
    }
    try {
      const body = await readFile(file);
      const type = TYPES[extname(file)] ?? 'application/octet-stream';
      served.push({ path, type });
      response.writeHead(200, { 'content-type': type, 'content-security-policy': server.csp }).end(body);
    } catch {
      missing.push(path);
      response.writeHead(404).end();
    }
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return {
    origin: `http://127.0.0.1:${server.address().port}`,
    served,
    missing,
    allowRelay(relayOrigin) {
      const channel = relayOrigin.replace(/^http/, 'ws');
      server.csp = `default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; connect-src 'self' ${relayOrigin} ${channel}; frame-ancestors 'none'`;
    },
    close: () => new Promise((ok) => server.close(ok)),
  };
}

// `vite dev` serving the example on a free loopback port: the dev server pre-bundles
// dependencies, which the example's vite.config.js must keep away from the package.
async function viteDev() {
  const port = await new Promise((ok) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port: free } = probe.address();
      probe.close(() => ok(free));
    });
  });
  // CI=true turns Vite's colours on whatever the terminal; NO_COLOR keeps its banner plain.
  const child = spawn(process.execPath, ['node_modules/vite/bin/vite.js', '--host', '127.0.0.1', '--port', String(port), '--strictPort'], {
    cwd: EXAMPLE, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' },
  });
  const origin = `http://127.0.0.1:${port}`;
  const output = [];
  let exited = false;
  child.once('exit', () => { exited = true; });
  try {
    await new Promise((ok, fail) => {
      const timer = setTimeout(() => fail(new Error(`vite dev did not say it serves ${origin} within 60 s:\n${output.join('')}`)), 60_000);
      child.once('exit', (status) => fail(new Error(`vite dev exited (${status}):\n${output.join('')}`)));
      for (const stream of [child.stdout, child.stderr]) {
        stream.on('data', (chunk) => {
          output.push(String(chunk));
          // Colours or not, the banner names the address it serves.
          if (output.join('').replace(/\x1b\[[0-9;]*m/g, '').includes(origin)) { clearTimeout(timer); ok(); }
        });
      }
    });
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  return {
    origin,
    output,
    close: () => new Promise((ok) => {
      if (exited) return ok();
      const kill = setTimeout(() => child.kill('SIGKILL'), 5_000);
      child.once('exit', () => { clearTimeout(kill); ok(); });
      child.kill('SIGTERM');
    }),
  };
}

let browser;
let app;
let dev;
let relay;

before(async () => {
  await buildExample();
  app = await appServer();
  dev = await viteDev();
  relay = await startRelay({ args: ['--app-origin', app.origin, '--app-origin', dev.origin] });
  app.allowRelay(relay.base);
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await relay?.stop();
  await app?.close();
  await dev?.close();
});

test('the example host app, built by Vite from the npm package, serves its tool to the real plugin', async () => {
  const link = await relay.newAppSigninUrl(app.origin);
  assert.ok(link.startsWith(`${app.origin}/#signin=`), link);
  const context = await browser.newContext();
  const page = await openPage(context, link);
  page.on('pageerror', (error) => page.consoleErrors.push(error.message));

  // Signed in and opened: the tool registered through the module is listed.
  await page.waitForSelector('#tools input[value="word_count"]', { timeout: 30_000 }).catch(async (error) => {
    const status = await page.textContent('#status');
    throw new Error(`the app did not open the module (status: ${status}; not found: ${app.missing}; console: ${page.consoleErrors})`, { cause: error });
  });
  assert.equal(await page.evaluate(() => location.hash), '', 'the sign-in code leaves the address bar');
  assert.match(await page.textContent('#who'), /^owner, until /);
  // Sealpost.signIn made a token scoped to this app: it cannot reach the relay's own app.
  const token = await page.evaluate(() => JSON.parse(sessionStorage.getItem('host-example-signin')).token);
  const me = await api(relay.base, 'GET', '/v1/me', { token });
  assert.equal(me.body.app_origin, app.origin);
  const ownApp = await api(relay.base, 'POST', '/v1/auth/signin-links', { token, body: {} });
  assert.equal(ownApp.status, 403);
  assert.equal(ownApp.body.error.code, 'outside_app_scope');
  const listed = await page.$$eval('#tools input', (boxes) => boxes.map((box) => box.value));
  assert.ok(listed.includes('search_workspace'), `the built-in tools are listed too: ${listed}`);
  await page.waitForSelector('#tools input[value="shout"]');
  assert.equal(await page.$$eval('#tools input:checked', (boxes) => boxes.length), 0, 'nothing is granted until the person ticks it');

  await page.check('#tools input[value="word_count"]');
  await page.waitForFunction(() => document.getElementById('status').textContent === 'Granted: word_count.');
  await page.check('#tools input[value="shout"]');
  await page.waitForFunction(() => document.getElementById('status').textContent === 'Granted: shout, word_count.');
  await page.click('#start');
  await page.waitForFunction(() => document.getElementById('status').textContent.startsWith('Serving'), null, { timeout: 15_000 });
  const pairingCode = await page.textContent('#pairing-code');
  assert.match(pairingCode, /^sppair1_/);

  const config = tempDir('sealpost-package-plugin-');
  const paired = await pairPlugin(config, pairingCode);
  assert.equal(paired.status, 0, paired.output);
  const mcp = new McpClient(config);
  await mcp.initialize();
  const tools = (await mcp.request('tools/list')).result.tools.map((tool) => tool.name);
  assert.ok(tools.includes('word_count') && tools.includes('shout'), `the granted tools reach the agent: ${tools}`);
  assert.ok(!tools.includes('search_workspace'), `an ungranted tool does not: ${tools}`);
  const counted = await mcp.call('word_count', { text: 'sealed in the tab, opened by the plugin' });
  assert.equal(counted.isError, false, counted.text);
  assert.match(counted.text, /\b8 words\b/);
  await page.waitForFunction(() => document.getElementById('calls').value === '1');
  // The page's WebMCP tool answers once the person allows the call in the page.
  const shouted = mcp.call('shout', { text: 'sealed' });
  await page.click('[data-sealpost-confirm] button:text-is("Allow once")');
  const answer = await shouted;
  assert.equal(answer.isError, false, answer.text);
  assert.match(answer.text, /SEALED/);
  mcp.close();
  await page.screenshot({ path: screenshotPath('package-host-app'), fullPage: true });

  // Vite's output holds the Worker and the wasm, and the page loaded both from its own origin.
  const served = app.served.map(({ path, type }) => `${path} ${type}`);
  assert.ok(served.some((line) => /^\/assets\/worker-[\w-]+\.js text\/javascript$/.test(line)), `the Worker was served: ${served}`);
  assert.ok(served.some((line) => /^\/assets\/sealpost_browser_bg-[\w-]+\.wasm application\/wasm$/.test(line)), `the wasm was served: ${served}`);
  const elsewhere = page.requests.filter((url) => !url.startsWith(app.origin) && !url.startsWith(relay.base));
  assert.deepEqual(elsewhere, [], 'the page asks nothing of any origin but its own and its relay');
  assert.deepEqual(await page.evaluate(() => window.__csp ?? []), [], 'the CSP docs/HOST.md names is enough');
  assert.deepEqual(page.consoleErrors, []);

  // A reload keeps the person signed in: the kept token is renewed (Sealpost.renew) into a new one.
  await page.reload();
  await page.waitForSelector('#tools input[value="word_count"]', { timeout: 30_000 });
  const renewed = await page.evaluate(() => JSON.parse(sessionStorage.getItem('host-example-signin')).token);
  assert.notEqual(renewed, token, 'the renewal hands out a new token');
  assert.equal((await api(relay.base, 'GET', '/v1/me', { token: renewed })).status, 200);
  await context.close();

  // The link works once: opened again, the page says why it cannot sign in.
  const again = await browser.newContext();
  const used = await openPage(again, link);
  await used.waitForFunction(() => document.getElementById('status').textContent !== 'Signing in…');
  assert.match(await used.textContent('#status'), /sign-in (link|code)/i);
  assert.equal(await used.textContent('#who'), 'nobody yet');
  await again.close();
});

test('vite dev serves the same app from the package, Worker and wasm included', async () => {
  const context = await browser.newContext();
  const page = await openPage(context, await relay.newAppSigninUrl(dev.origin));
  page.on('pageerror', (error) => page.consoleErrors.push(error.message));
  await page.waitForSelector('#tools input[value="word_count"]', { timeout: 60_000 }).catch((error) => {
    throw new Error(`the module did not open under vite dev (console: ${page.consoleErrors}; vite: ${dev.output.join('')})`, { cause: error });
  });
  assert.match(await page.textContent('#who'), /^owner, until /);
  await context.close();
});
