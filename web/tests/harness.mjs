// What the specs share: a real sealpost-relay on loopback serving the built app, Debian's
// Chromium through playwright-core, and the real `sealpost` plugin spoken to over stdio as an
// MCP client speaks to it. xtask passes the binaries' paths; defaults suit a debug build.

import { spawn, execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync, cpSync, appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { createInterface } from 'node:readline';
import { after } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { launchFirefox } from './firefox.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const RELAY_BIN = process.env.SEALPOST_RELAY_BIN ?? join(root, 'target/debug/sealpost-relay');
export const PLUGIN_BIN = process.env.SEALPOST_BIN ?? join(root, 'target/debug/sealpost');
export const WEB_DIR = process.env.SEALPOST_WEB_DIR ?? join(root, 'target/web');
export const CHROMIUM = process.env.SEALPOST_CHROMIUM ?? '/usr/bin/chromium';
export const SCREENSHOTS = join(root, 'target/screenshots');

// A test that cannot run here says so where `cargo xtask test` counts it: `SKIPPED: WHAT TEST`
// on stderr and in the file SEALPOST_SKIP_LOG names (xtask's skips.rs reads both ways).
export function skipped(what, why) {
  const line = `SKIPPED: ${what} ${why}\n`;
  process.stderr.write(line);
  if (process.env.SEALPOST_SKIP_LOG) appendFileSync(process.env.SEALPOST_SKIP_LOG, line);
}

export function tempDir(prefix) {
  return mkdtempSync(join(tmpdir(), prefix));
}

// A relay on a fresh SQLite file serving `web` (the built app by default); resolves once it
// listens, with the first owner's sign-in link. `restart()` stops it and starts it again on the
// same address and database, as a relay that went away and came back.
// `args`: extra `serve` flags (a bench lifts the per-owner rate); `log`: the relay's SEALPOST_LOG.
// `database` is a URL; a fresh SQLite file when not given.
// `listen`: the address, when it must be known before the relay starts (a provider's redirect).
export async function startRelay({ web = WEB_DIR, args = [], log = 'warn', database = null, listen = '127.0.0.1:0' } = {}) {
  const dir = tempDir('sealpost-web-relay-');
  database ??= `sqlite://${dir}/relay.db`;
  let child;
  let code = null;
  let metricsUrl = null;
  const spawnRelay = (listen) => new Promise((ok, fail) => {
    child = spawn(RELAY_BIN, ['serve', '--listen', listen, '--database-url', database, '--web', web, ...args], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, SEALPOST_LOG: log },
    });
    child.once('exit', (status) => fail(new Error(`the relay exited (${status})`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      const signin = line.match(/#signin=([A-Za-z0-9_-]+)/);
      if (signin) code = signin[1];
      const metrics = line.match(/metrics on (http:\/\/\S+)/);
      if (metrics) metricsUrl = metrics[1];
      const listening = line.match(/listening on (http:\/\/\S+)/);
      if (listening) ok(listening[1]);
    });
  });
  const stopRelay = async () => {
    const exited = new Promise((ok) => child.once('exit', ok));
    child.kill('SIGTERM');
    await exited;
  };
  const base = await spawnRelay(listen);
  return {
    base,
    // The first start's link; null on a database that already has an owner.
    signinUrl: code ? `${base}/#signin=${code}` : null,
    // Where the relay serves /metrics, once it has said (just after it listens), if it does.
    get metricsUrl() { return metricsUrl; },
    database,
    async newSigninUrl() {
      const out = await new Promise((ok, fail) => execFile(RELAY_BIN, ['owner', 'link', 'owner', '--database-url', database], (e, stdout) => (e ? fail(e) : ok(stdout))));
      return `${base}/#signin=${out.match(/#signin=([A-Za-z0-9_-]+)/)[1]}`;
    },
    // The link the operator prints for a host app (`owner link owner --app ORIGIN`), as it is.
    async newAppSigninUrl(appOrigin) {
      const flags = ['owner', 'link', 'owner', '--app', appOrigin, '--app-origin', appOrigin, '--public-url', base, '--database-url', database];
      const out = await new Promise((ok, fail) => execFile(RELAY_BIN, flags, (e, stdout) => (e ? fail(e) : ok(stdout))));
      return out.match(/https?:\/\/\S+#signin=\S+/)[0];
    },
    // An owner token, signed in through the API with a fresh link.
    async ownerToken() {
      const link = await this.newSigninUrl();
      const signed = await api(base, 'POST', '/v1/auth/signin', { body: { code: link.split('#signin=')[1] } });
      return signed.body.token;
    },
    async down() {
      await stopRelay();
    },
    async up() {
      await spawnRelay(new URL(base).host);
    },
    async stop() {
      await stopRelay();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// One JSON request to the relay: {status, body}.
export async function api(base, method, path, { token, body } = {}) {
  const headers = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${base}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

// The built app plus the host-app fixture (`web/tests/host/`) in one folder for a relay to serve.
export function webWithHostFixture() {
  const dir = tempDir('sealpost-web-host-');
  cpSync(WEB_DIR, dir, { recursive: true });
  cpSync(join(root, 'web/tests/host'), join(dir, 'host'), { recursive: true });
  return dir;
}

// What a pairing code carries (docs/PROTOCOL.md, "Pairing code"): the relay origin and the MCP
// token, so a spec can speak to the relay as the plugin would.
export function decodePairingCode(code) {
  const bytes = Buffer.from(code.trim().replace(/^sppair1_/, ''), 'base64url');
  let at = 1 + 32;
  const originLength = bytes[at]; at += 1;
  const origin = bytes.subarray(at, at + originLength).toString(); at += originLength;
  const tokenLength = bytes.readUInt16BE(at); at += 2;
  return { origin, mcpToken: bytes.subarray(at, at + tokenLength).toString() };
}

// `args`: more Chromium switches (for example `--enable-features=WebMCP`). `browser: 'firefox'`
// starts Firefox ESR instead (firefox.mjs), with `prefs` set in its profile.
export async function launchBrowser({ args = [], browser = 'chromium', prefs = {} } = {}) {
  if (browser === 'firefox') return await launchFirefox({ prefs });
  return await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', ...args],
  });
}

// A page that records every request it makes and every CSP violation it meets.
export async function openPage(context, url) {
  const page = await context.newPage();
  page.requests = [];
  page.cspViolations = [];
  page.consoleErrors = [];
  page.on('request', (request) => page.requests.push(request.url()));
  page.on('console', (message) => {
    if (message.type() === 'error') page.consoleErrors.push(message.text());
    if (/Content Security Policy/i.test(message.text())) page.cspViolations.push(message.text());
  });
  await page.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (event) => {
      (window.__csp ??= []).push(`${event.violatedDirective} ${event.blockedURI}`);
    });
  });
  if (url) await page.goto(url);
  return page;
}

// On the app's AI access page: access on, `source` and every tool granted, a session started
// and serving; answers the pairing code it shows.
export async function grantAllAndServe(page, source) {
  await page.click('nav a[href="#/access"]');
  await page.waitForSelector('main h2:text-is("AI access")');
  await page.check('#access-on');
  await page.check(`input[name="grant-source"][value="${source}"]`);
  for (const box of await page.$$('input[name="grant-tool"]')) await box.check();
  await page.click('#save-grants');
  await page.click('#start-session');
  await page.waitForSelector('#pairing-code');
  await page.waitForSelector('#status-pill:text-is("Serving")');
  return (await page.textContent('#pairing-code')).trim();
}

// Writes a folder of Markdown files; returns its path.
export function writeFolder(files) {
  const dir = tempDir('sealpost-web-docs-');
  for (const [path, body] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), body);
  }
  return dir;
}

// `sealpost pair` with the code on stdin; resolves to {status, output}.
// `args`: more arguments (for example `--replace`).
export function pairPlugin(configDir, code, args = []) {
  return new Promise((ok) => {
    const child = spawn(PLUGIN_BIN, ['pair', ...args], { env: { ...process.env, SEALPOST_CONFIG_DIR: configDir }, stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => { output += d; });
    child.stderr.on('data', (d) => { output += d; });
    child.on('exit', (status) => ok({ status, output }));
    child.stdin.end(`${code}\n`);
  });
}

// Plugins still running when a spec file ends: a spec that failed half-way never closed its
// own, and their open pipes would keep the file's process (and the whole run) waiting.
const runningPlugins = new Set();
after(() => { for (const child of runningPlugins) child.kill(); });

// `sealpost mcp` as an MCP client drives it: JSON-RPC lines on stdio. `env`: more variables
// for the plugin (SEALPOST_CALL_TIMEOUT_S, ...).
// An MCP client over stdio, raw JSON lines: `sealpost mcp` by default, or any stdio server
// (`command`), so a benchmark drives Sealpost and a peer with the very same client.
export class McpClient {
  // `onLog`, when given, gets each line the program writes to stderr (which is otherwise
  // passed through).
  constructor(configDir, { env = {}, command = [PLUGIN_BIN, 'mcp'], onLog = null } = {}) {
    const [program, ...args] = command;
    this.child = spawn(program, args, { env: { ...process.env, ...env, SEALPOST_CONFIG_DIR: configDir }, stdio: ['pipe', 'pipe', onLog ? 'pipe' : 'inherit'] });
    if (onLog) createInterface({ input: this.child.stderr }).on('line', onLog);
    runningPlugins.add(this.child);
    this.child.on('exit', () => runningPlugins.delete(this.child));
    this.nextId = 1;
    this.waiting = new Map();
    this.notifications = [];
    createInterface({ input: this.child.stdout }).on('line', (line) => {
      const message = JSON.parse(line);
      if (message.id !== undefined && this.waiting.has(message.id)) {
        this.waiting.get(message.id)(message);
        this.waiting.delete(message.id);
      } else {
        this.notifications.push(message);
      }
    });
  }

  request(method, params = {}) {
    const id = this.nextId++;
    return new Promise((ok) => {
      this.waiting.set(id, ok);
      this.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
    });
  }

  async initialize() {
    const answer = await this.request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'web-spec', version: '1' } });
    this.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
    return answer;
  }

  // A tool call's text and whether it is an error.
  async call(name, args = {}) {
    const answer = await this.request('tools/call', { name, arguments: args });
    const result = answer.result;
    return { text: result.content.map((c) => c.text).join('\n'), isError: result.isError === true };
  }

  close() {
    this.child.stdin.end();
  }
}

export function screenshotPath(name) {
  mkdirSync(SCREENSHOTS, { recursive: true });
  return join(SCREENSHOTS, `${name}.png`);
}

// A loopback address no one listens on now (for a relay whose address a provider must know
// before it starts).
export async function freeAddress() {
  const { createServer } = await import('node:net');
  const server = createServer();
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address();
  await new Promise((ok) => server.close(ok));
  return `127.0.0.1:${port}`;
}

// The tests' OpenID provider (tests/oidc/provider.mjs: oidc-provider on loopback) with the
// relay's callback registered; `remove(user)` removes a person there, `stop()` ends it.
export async function startProvider(redirectUris, clientSecret = 'relay-client-secret-for-tests') {
  const args = [join(dirname(fileURLToPath(import.meta.url)), 'oidc/provider.mjs'), '--client-secret', clientSecret];
  for (const uri of redirectUris) args.push('--redirect-uri', uri);
  const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'ignore'] });
  const issuer = await new Promise((ok, fail) => {
    child.once('exit', (status) => fail(new Error(`the provider exited (${status})`)));
    createInterface({ input: child.stdout }).once('line', (line) => ok(JSON.parse(line).issuer));
  });
  const secretFile = join(tempDir('sealpost-oidc-'), 'client-secret');
  writeFileSync(secretFile, clientSecret);
  return {
    issuer,
    secretFile,
    async remove(user) {
      const response = await fetch(`${issuer}/_test/remove?user=${encodeURIComponent(user)}`, { method: 'POST' });
      if (response.status !== 204) throw new Error(`remove ${user}: ${response.status}`);
    },
    stop() {
      child.stdin.end();
      child.kill();
    },
  };
}
