// The whole product as a person uses it: a real Chromium tab on the real relay, the real
// `sealpost` plugin paired with the code the tab shows and driven over stdio as an MCP client.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  startRelay, launchBrowser, openPage, writeFolder, tempDir, pairPlugin, McpClient, screenshotPath, PLUGIN_BIN,
} from './harness.mjs';

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

let relay;
let browser;
let context;
const requests = [];

before(async () => {
  relay = await startRelay();
  browser = await launchBrowser();
  context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: relay.base });
  context.on('request', (request) => requests.push(request.url()));
});

after(async () => {
  await browser?.close();
  await relay?.stop();
});

async function signedIn(page) {
  await page.waitForSelector('#nav:not([hidden])');
  await page.waitForSelector('main h2:not(:text-is("Sign in"))');
}

async function go(page, route, heading) {
  await page.click(`nav a[href="${route}"]`);
  await page.waitForSelector(`main h2:text-is("${heading}")`);
}

async function startSession(page) {
  await go(page, '#/access', 'AI access');
  await page.click('#start-session');
  await page.waitForSelector('#status-pill:text-is("Serving")');
  // A plugin already paired and following the tab looks the new session up at once, and the
  // secret code then goes out of sight until asked for: ask for it again when it has.
  for (;;) {
    await page.waitForFunction(() => Boolean(document.getElementById('pairing-code') || document.getElementById('show-code')));
    // Read in one step: the code may go out of sight between two.
    const code = await page.evaluate(() => {
      const shown = document.getElementById('pairing-code');
      if (shown) return shown.textContent.trim();
      document.getElementById('show-code')?.click();
      return null;
    });
    if (code) return code;
  }
}

// A new browser signed in on its own, AI access on with every tool granted (no source).
async function signedInWithEveryTool() {
  const fresh = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await openPage(fresh, await relay.newSigninUrl());
  await signedIn(page);
  await go(page, '#/access', 'AI access');
  await page.check('#access-on');
  for (const box of await page.$$('input[name="grant-tool"]')) await box.check();
  await page.click('#save-grants');
  return { fresh, page };
}

// A state of the app, photographed at both sizes (target/screenshots/NAME-WxH.png); the page
// goes back to the size it had.
async function photograph(page, name) {
  const was = page.viewportSize();
  for (const [width, height] of [[1280, 800], [390, 844]]) {
    await page.setViewportSize({ width, height });
    await page.screenshot({ path: screenshotPath(`${name}-${width}x${height}`), fullPage: true });
  }
  await page.setViewportSize(was);
}

async function paired(code) {
  const config = tempDir('sealpost-web-plugin-');
  const result = await pairPlugin(config, code);
  assert.equal(result.status, 0, result.output);
  const mcp = new McpClient(config);
  await mcp.initialize();
  return { config, mcp, output: result.output };
}

// The pages a person meets before they may use Sealpost (sign-in, unlock, locked) offer none
// of the navigation or account controls: they would lead nowhere.
async function checkNoChrome(page, name) {
  for (const selector of ['#nav', '#account']) {
    assert.equal(await page.isVisible(selector), false, `${name}: ${selector} is shown`);
  }
  const reachable = await page.evaluate(() => [...document.querySelectorAll('#nav a, #account button')]
    .filter((e) => e.checkVisibility()).map((e) => e.textContent));
  assert.deepEqual(reachable, [], `${name}: dead controls can be reached`);
}

async function checkAccessibility(page, name) {
  await page.evaluate(AXE);
  const results = await page.evaluate(async () => await window.axe.run(document, { resultTypes: ['violations'] }));
  const serious = results.violations.filter((v) => ['serious', 'critical'].includes(v.impact));
  assert.deepEqual(serious.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`), [], `${name}: accessibility`);
}

// A value the page forgot to leave out shows as the word itself ("null", "undefined").
async function checkNoStrayValues(page, name) {
  const stray = await page.evaluate(() => {
    const found = [];
    const walker = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const text = walker.currentNode.textContent.trim();
      if (['null', 'undefined', 'NaN', '[object Object]'].includes(text)) found.push(text);
    }
    return found;
  });
  assert.deepEqual(stray, [], `${name}: a stray value is shown`);
}

test('a person signs in, imports, grants one source of two, pairs, and an MCP client gets answers', async () => {
  const page = await openPage(context, relay.signinUrl);
  page.on('pageerror', (error) => page.consoleErrors.push(error.message));
  try {
    await person(page);
  } catch (error) {
    // What the person saw when it failed, for whoever reads the CI log.
    if (!page.isClosed()) {
      await page.screenshot({ path: screenshotPath('failure') }).catch(() => {});
      console.error('page when it failed:', await page.locator('body').innerText().catch(() => '?'));
    }
    console.error('console errors:', page.consoleErrors);
    throw error;
  }
});

async function person(page) {
  const { mcp } = await firstAnswers(page);
  await chromiumOnward(page, mcp);
}

// The main flow as far as every browser goes: signed in from the link, two folders imported,
// one of them and every tool granted, a session paired with the real plugin, answers, a
// proposal approved, and a reload that resumes serving without pairing again. `clipboard`:
// the copy button is checked too (Chromium grants the spec the clipboard); `folders`: imported
// through the folder picker.
async function firstAnswers(page, { clipboard = true, folders = true } = {}) {
  await signedIn(page);
  assert.ok(!page.url().includes('signin='), 'the sign-in code leaves the address bar at once');

  // Two folders, two sources.
  const notes = writeFolder({
    'notes/rotation.md': '# Key rotation\nRotate the signing keys every ninety days.\n',
    'notes/lunch.md': '# Lunch\nThe lunch menu rotation is weekly.\n',
  });
  // A folder's picker, or where the driver cannot pick a folder (Firefox over BiDi), the
  // folder's files through the files' picker.
  const pick = (dir, names) => (folders ? page.setInputFiles('#pick-folder', dir) : page.setInputFiles('#pick-files', names.map((name) => join(dir, name))));
  await page.fill('#source-name', 'notes');
  await pick(join(notes, 'notes'), ['rotation.md', 'lunch.md']);
  await page.waitForSelector('#import-status:text("Imported 2 files into notes.")');
  const secret = writeFolder({ 'private/salary.md': '# Salary\nThe rotation of salaries is secret.\n' });
  await page.fill('#source-name', 'private');
  await pick(join(secret, 'private'), ['salary.md']);
  await page.waitForSelector('#import-status:text("Imported 1 files into private.")');

  // AI access: on, one source, every tool.
  await go(page, '#/access', 'AI access');
  await page.check('#access-on');
  await page.check('input[name="grant-source"][value="notes"]');
  for (const box of await page.$$('input[name="grant-tool"]')) await box.check();
  await page.click('#save-grants');
  const code = await startSession(page);
  assert.match(code, /^sppair1_/);
  if (clipboard) {
    await page.click('#copy-code');
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), code);
  }
  const shownFingerprint = (await page.textContent('#fingerprint')).trim();
  // Commands are set as code, not in Markdown's backticks, and named for what they print.
  const pairingHelp = await page.textContent('#pairing');
  assert.ok(!pairingHelp.includes('`'), pairingHelp);
  assert.match(pairingHelp, /prints the same six digits/);

  // The real plugin pairs with the code and is driven over stdio.
  const { config, mcp, output } = await paired(code);
  assert.ok(output.includes(shownFingerprint), `the plugin shows the tab's fingerprint: ${output}`);
  const found = await mcp.call('search_workspace', { query: 'rotation' });
  assert.equal(found.isError, false, found.text);
  assert.ok(found.text.includes('Key rotation'), found.text);
  assert.ok(!found.text.includes('Salary'), 'an ungranted source never answers');

  // The official TypeScript SDK's client, as Claude Desktop, Cursor and VS Code run it: the
  // tools carry titles, annotations and output schemas, and the search's structured answer
  // passes its schema (the SDK checks it against the listed one, and throws if it does not).
  const sdk = new Client({ name: 'sealpost-web-check', version: '1' });
  await sdk.connect(new StdioClientTransport({ command: PLUGIN_BIN, args: ['mcp'], env: { PATH: process.env.PATH, SEALPOST_CONFIG_DIR: config }, stderr: 'inherit' }));
  const { tools } = await sdk.listTools();
  const search = tools.find((t) => t.name === 'search_workspace');
  assert.equal(search.title, 'Search the workspace');
  assert.deepEqual([search.annotations.readOnlyHint, search.annotations.destructiveHint], [true, false]);
  assert.equal(search.outputSchema?.type, 'object', JSON.stringify(search));
  const checked = await sdk.callTool({ name: 'search_workspace', arguments: { query: 'rotation' } });
  assert.equal(checked.structuredContent?.results?.[0]?.title, 'Key rotation', JSON.stringify(checked));
  await sdk.close();
  // Asked for by name, it answers as a missing one would; the person sees a refusal.
  const hidden = await mcp.call('get_workspace_outline', { source: 'private' });
  assert.equal(hidden.isError, true, hidden.text);
  assert.match(hidden.text, /No source named "private"/);

  // A proposal shows in Review; approving changes the document; Activity shows it.
  const docId = found.text.match(/"doc_id":\s*"(d_[0-9a-f]+)"/)?.[1] ?? found.text.match(/(d_[0-9a-f]{24})/)[1];
  const proposed = await mcp.call('propose_edit_note', { doc_id: docId, find: 'ninety', replace: 'thirty' });
  assert.equal(proposed.isError, false, proposed.text);
  assert.match(proposed.text, /\{"proposal_id":"[^"]+","status":"pending_review"\}/, 'the promised answer, as JSON text');
  await go(page, '#/review', 'Review');
  await page.waitForSelector('article h3:text("Key rotation")');
  await page.click('article button:text-is("Approve")');
  await page.waitForSelector('#notice:text("Applied.")');
  const excerpt = await mcp.call('get_source_excerpt', { doc_id: docId });
  assert.ok(excerpt.text.includes('thirty days'), excerpt.text);
  await go(page, '#/activity', 'Activity');
  await page.waitForSelector('td:text("proposal applied")');
  await page.waitForSelector('td:text-is("refused (not granted)")');

  // A reload keeps serving, without pairing again.
  await page.reload();
  await signedIn(page);
  await page.waitForSelector('#status-pill:text-is("Serving")');
  const again = await mcp.call('search_workspace', { query: 'lunch' });
  assert.equal(again.isError, false, again.text);
  return { mcp };
}

async function chromiumOnward(page, mcp) {

  // Only the relay knows when the plugin last looked the session up; AI access shows it.
  await go(page, '#/access', 'AI access');
  await page.waitForSelector('#access-status tr:has(th:text-is("Plugin last seen")) td:text-matches("^[0-9]+ s ago$")');
  // The tab serves over its WebSocket to the relay, and says so.
  await page.waitForSelector('#access-status tr:has(th:text-is("Connection")) td:text-is("WebSocket")');

  // Hidden: headless Chromium reports a page behind another as visible, so the spec does what
  // Chromium does to a background tab at its harshest and freezes the page (no task of the
  // page runs; its timers stop). The Worker's loop answers all the same. How fast it answers
  // hidden and in front is measured by `cargo xtask bench web`.
  const other = await context.newPage();
  await other.goto(`${relay.base}/healthz`);
  await other.bringToFront();
  const lifecycle = await context.newCDPSession(page);
  await lifecycle.send('Page.setWebLifecycleState', { state: 'frozen' });
  const hidden = await mcp.call('search_workspace', { query: 'rotation' });
  await lifecycle.send('Page.setWebLifecycleState', { state: 'active' });
  assert.equal(hidden.isError, false, hidden.text);
  assert.ok(hidden.text.includes('Key rotation'), hidden.text);
  await other.close();
  await page.bringToFront();

  // Every page: screenshots at both sizes in the light and the dark scheme, no serious
  // accessibility violation (contrast included) in either.
  for (const [route, heading, name] of [
    ['#/workspace', 'Workspace', 'workspace'], ['#/access', 'AI access', 'access'], ['#/review', 'Review', 'review'],
    ['#/activity', 'Activity', 'activity'], ['#/tokens', 'Tokens', 'tokens'], ['#/leaves', 'What leaves this tab', 'leaves'],
  ]) {
    await go(page, route, heading);
    for (const scheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const [width, height] of [[1280, 800], [390, 844]]) {
        await page.setViewportSize({ width, height });
        const shown = `${name}${scheme === 'dark' ? '-dark' : ''}-${width}x${height}`;
        await checkAccessibility(page, shown);
        await checkNoStrayValues(page, name);
        await page.screenshot({ path: screenshotPath(shown), fullPage: true });
      }
    }
    await page.emulateMedia({ colorScheme: 'light' });
    await page.setViewportSize({ width: 1280, height: 800 });
  }
  const dark = await page.evaluate(() => matchMedia('(prefers-color-scheme: dark)').matches);
  assert.equal(dark, false, 'back in the light scheme');

  // Ending the session: the next call says the tab is not open.
  await go(page, '#/access', 'AI access');
  await page.click('#end-session');
  await page.waitForSelector('#notice:text("Session ended.")');
  await photograph(page, 'stopped-session-ended');
  const ended = await mcp.call('search_workspace', { query: 'rotation' });
  assert.equal(ended.isError, true);
  assert.ok(ended.text.includes('no session is live'), ended.text);

  // Revoking the plugin's token: the next call says so.
  await startSession(page);
  assert.equal((await mcp.call('list_sources')).isError, false);
  await go(page, '#/tokens', 'Tokens');
  await page.waitForSelector('td span:text-is("This device")');
  await page.click('td button:text-is("Revoke")');
  await page.waitForSelector('#notice:text("its pairing is gone")');
  await photograph(page, 'stopped-pairing-revoked');
  const revoked = await mcp.call('list_sources');
  assert.equal(revoked.isError, true);
  assert.ok(revoked.text.includes('revoked or has expired'), revoked.text);
  mcp.close();

  // A new pairing; then locking stops serving at once.
  await go(page, '#/access', 'AI access');
  await page.click('#unpair');
  await page.waitForSelector('#notice:text("Unpaired")');
  const second = await paired(await startSession(page));
  assert.equal((await second.mcp.call('list_sources')).isError, false);

  // AI access switched off: the agent is told that, not that the tab is locked.
  await go(page, '#/access', 'AI access');
  await page.uncheck('#access-on');
  await page.click('#save-grants');
  const off = await second.mcp.call('list_sources');
  assert.equal(off.isError, true);
  assert.ok(/AI access is switched off/.test(off.text), off.text);
  assert.ok(!/is locked/.test(off.text), `access off is not a lock: ${off.text}`);
  await page.check('#access-on');
  await page.click('#save-grants');
  assert.equal((await second.mcp.call('list_sources')).isError, false);
  await page.click('#lock');
  await page.waitForSelector('main h2:text-is("Locked")');
  const locked = await second.mcp.call('list_sources');
  assert.equal(locked.isError, true);
  assert.ok(locked.text.includes('not open'), locked.text);

  // Unlocking (a reload) serves again; signing out stops it.
  await page.reload();
  await signedIn(page);
  await page.waitForSelector('#status-pill:text-is("Serving")');
  assert.equal((await second.mcp.call('list_sources')).isError, false);
  await page.click('#signout');
  await page.waitForSelector('main h2:text-is("Sign in")');
  const signedOut = await second.mcp.call('list_sources');
  assert.equal(signedOut.isError, true);
  assert.ok(signedOut.text.includes('not open'), signedOut.text);

  // Signed in again, serving; closing the tab ends the session.
  await page.goto(await relay.newSigninUrl());
  await signedIn(page);
  await startSession(page);
  assert.equal((await second.mcp.call('list_sources')).isError, false);
  // With `runBeforeUnload` the close does not wait for the page to go: until it has, the tab
  // may still claim and answer a call, so the call below waits for the page to be gone.
  const gone = page.waitForEvent('close');
  await page.close({ runBeforeUnload: true });
  await gone;
  // The page's last request (ending the session) may land just before or just after the call.
  const closed = await second.mcp.call('list_sources');
  assert.equal(closed.isError, true);
  assert.ok(/not open|session ended/.test(closed.text), closed.text);
  second.mcp.close();

  // No request left for anywhere but the relay, and the strict CSP was never violated.
  const foreign = requests.filter((url) => !url.startsWith(relay.base) && !url.startsWith('blob:') && !url.startsWith('data:'));
  assert.deepEqual(foreign, [], 'requests only to its own relay');
  assert.deepEqual(page.cspViolations, [], 'no CSP violation');
}

test('in Firefox ESR: the main flow, and a tool the app\'s page offers through WebMCP, called once the person confirms', async () => {
  const firefox = await launchBrowser({ browser: 'firefox' });
  try {
    const page = await openPage(await firefox.newContext(), await relay.newSigninUrl());
    page.on('pageerror', (error) => page.consoleErrors.push(`uncaught: ${error.message}`));
    const { mcp } = await firstAnswers(page, { clipboard: false, folders: false });

    // A tool the page registers through WebMCP (Sealpost's context, as Firefox ESR has none):
    // granted on AI access, and run only once the person allows it in the page.
    await page.evaluate(() => document.modelContext.registerTool({
      name: 'shout',
      description: 'Shouts the text back in capitals.',
      inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      execute: async ({ text }) => text.toUpperCase(),
    }));
    await go(page, '#/workspace', 'Workspace');
    await go(page, '#/access', 'AI access');
    await page.check('input[name="grant-tool"][value="shout"]');
    await page.click('#save-grants');
    for (let i = 0; i < 100 && !(await mcp.request('tools/list')).result.tools.some((tool) => tool.name === 'shout'); i += 1) {
      await new Promise((ok) => setTimeout(ok, 100));
    }
    const answer = mcp.call('shout', { text: 'from firefox' });
    await page.click('[data-sealpost-confirm] button:text-is("Allow once")');
    const shouted = await answer;
    assert.equal(shouted.isError, false, shouted.text);
    assert.match(shouted.text, /FROM FIREFOX/);
    mcp.close();
    assert.deepEqual(page.consoleErrors.filter((error) => error.startsWith('uncaught')), [], 'nothing uncaught');
  } finally {
    await firefox.close();
  }
});

// Presses Tab until the focused element matches `selector`; fails if it is never reached.
async function tabTo(page, selector, most = 80) {
  for (let i = 0; i < most; i += 1) {
    await page.keyboard.press('Tab');
    if (await page.evaluate((sel) => document.activeElement?.matches(sel) ?? false, selector)) {
      assert.ok(await page.evaluate(() => document.activeElement.matches(':focus-visible')), `${selector} shows its focus`);
      return;
    }
  }
  assert.fail(`${selector} cannot be reached with the keyboard`);
}

test('everything a person needs to serve is reachable and works by keyboard alone', async () => {
  const page = await openPage(context, await relay.newSigninUrl());
  await signedIn(page);
  await tabTo(page, 'nav a[href="#/access"]');
  await page.keyboard.press('Enter');
  await page.waitForSelector('main h2:text-is("AI access")');
  await tabTo(page, '#access-on');
  if (!await page.isChecked('#access-on')) await page.keyboard.press('Space');
  assert.ok(await page.isChecked('#access-on'));
  await tabTo(page, 'input[name="grant-tool"][value="search_workspace"]');
  if (!await page.isChecked('input[name="grant-tool"][value="search_workspace"]')) await page.keyboard.press('Space');
  await tabTo(page, '#save-grants');
  await page.keyboard.press('Enter');
  await tabTo(page, '#start-session');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#pairing-code');
  const code = (await page.textContent('#pairing-code')).trim();
  await tabTo(page, '#copy-code');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#notice:text("Pairing code copied.")');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), code);
  await tabTo(page, '#end-session');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#notice:text("Session ended.")');
  await page.close();
});

test('a passphrase: set in the workspace, asked for after a reload, a wrong one refused in plain words', async () => {
  const page = await openPage(context, await relay.newSigninUrl());
  await signedIn(page);
  await page.fill('#new-passphrase', 'correct horse battery');
  await page.click('button:text-is("Set passphrase")');
  await page.waitForSelector('#notice:text("A passphrase now protects this workspace")');

  await page.reload();
  await page.waitForSelector('main h2:text-is("Unlock")');
  await checkNoChrome(page, 'unlock');
  for (const [width, height] of [[1280, 800], [390, 844]]) {
    await page.setViewportSize({ width, height });
    await checkAccessibility(page, `unlock at ${width}×${height}`);
    await checkNoStrayValues(page, 'unlock');
    await page.screenshot({ path: screenshotPath(`unlock-${width}x${height}`), fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.fill('#unlock-passphrase', 'wrong horse battery');
  await page.press('#unlock-passphrase', 'Enter');
  await page.waitForSelector('[role="alert"]:text("does not open this workspace")');
  await page.fill('#unlock-passphrase', 'correct horse battery');
  await page.press('#unlock-passphrase', 'Enter');
  await page.waitForSelector('main h2:text-is("Workspace")');
  assert.equal(await page.isVisible('#nav'), true, 'unlocked, the navigation is back');
  await page.waitForSelector('td a:text("Key rotation")');

  await page.click('#remove-passphrase');
  await page.waitForSelector('#notice:text("The passphrase is removed.")');
  await page.reload();
  await page.waitForSelector('main h2:text-is("Workspace")');
  await page.close();
});

test('an import of 1,000 files shows its progress and ends with every file in place', async () => {
  const files = {};
  for (let i = 0; i < 1000; i += 1) files[`bulk/folder-${i % 10}/note-${i}.md`] = `# Bulk note ${i}\nLine ${i} of a thousand.\n`;
  const folder = writeFolder(files);
  const page = await openPage(context, await relay.newSigninUrl());
  await signedIn(page);
  // Every status line the person saw, and the longest the page went without painting a frame.
  await page.evaluate(() => {
    window.statusLines = [];
    window.longestFrameGapMs = 0;
    new MutationObserver(() => window.statusLines.push(document.getElementById('import-status')?.textContent ?? ''))
      .observe(document.getElementById('main'), { subtree: true, childList: true, characterData: true });
    let last = performance.now();
    const frame = (now) => { window.longestFrameGapMs = Math.max(window.longestFrameGapMs, now - last); last = now; requestAnimationFrame(frame); };
    requestAnimationFrame(frame);
  });
  await page.fill('#source-name', 'bulk');
  await page.setInputFiles('#pick-folder', join(folder, 'bulk'));
  await page.waitForSelector('#import-status:text("Imported 1000 files into bulk.")', { timeout: 120_000 });
  const { statusLines, longestFrameGapMs } = await page.evaluate(() => ({ statusLines: window.statusLines, longestFrameGapMs: window.longestFrameGapMs }));
  const steps = statusLines.filter((line) => /^Imported \d+ of 1000 files…$/.test(line));
  assert.ok(new Set(steps).size >= 5, `progress shown along the way: ${[...new Set(steps)].join(' | ')}`);
  console.log(`1,000-file import: ${new Set(steps).size} progress steps, longest frame gap ${Math.round(longestFrameGapMs)} ms`);
  await page.fill('#filter', 'Bulk note 999');
  await page.waitForSelector('td a:text-is("Bulk note 999")');
  assert.equal(await page.locator('tbody tr').count(), 1);
  await page.close();
});

test('the sign-in and locked pages show no navigation or account controls', async () => {
  // A browser that has never signed in here.
  const fresh = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await openPage(fresh, relay.base);
  await page.waitForSelector('main h2:text-is("Sign in")');
  await checkNoChrome(page, 'sign-in');
  await photograph(page, 'sign-in');
  await page.goto(await relay.newSigninUrl());
  await signedIn(page);
  assert.equal(await page.isVisible('#nav'), true, 'signed in, the navigation is there');
  await page.click('#lock');
  await page.waitForSelector('main h2:text-is("Locked")');
  await checkNoChrome(page, 'locked');
  await photograph(page, 'stopped-locked');
  await fresh.close();
});

test('a session is not started for an empty catalog: access off or no tool granted says so', async () => {
  const fresh = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await openPage(fresh, await relay.newSigninUrl());
  await signedIn(page);
  await go(page, '#/access', 'AI access');
  await page.uncheck('#access-on');
  await page.click('#start-session');
  await page.waitForSelector('#notice:text("Switch AI access on")');
  assert.equal(await page.isVisible('#pairing-code'), false, 'no code for a session that offers nothing');
  await page.check('#access-on');
  for (const box of await page.$$('input[name="grant-tool"]')) await box.uncheck();
  await page.click('#start-session');
  await page.waitForSelector('#notice:text("Grant at least one tool")');
  assert.equal(await page.isVisible('#pairing-code'), false);
  await fresh.close();
});

test('a second tab says another tab serves the pairing, not that no session is running', async () => {
  const fresh = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const first = await openPage(fresh, await relay.newSigninUrl());
  await signedIn(first);
  await go(first, '#/access', 'AI access');
  await first.check('#access-on');
  for (const box of await first.$$('input[name="grant-tool"]')) await box.check();
  await first.click('#save-grants');
  await startSession(first);
  const second = await openPage(fresh, relay.base);
  await signedIn(second);
  await go(second, '#/access', 'AI access');
  await second.waitForSelector('#pairing :text("Another Sealpost tab is serving")');
  await photograph(second, 'served-elsewhere');
  assert.equal(await second.isVisible('#pairing :text("No session is running")'), false);
  // Starting here takes over: the first tab stops and says why.
  await second.click('#start-session');
  await second.waitForSelector('#status-pill:text-is("Serving")');
  await first.waitForSelector('#notice:text("Another Sealpost tab took over serving")');
  assert.equal(await first.textContent('#status-pill'), 'Not serving');
  await first.waitForFunction(() => /Not serving: another tab took over/.test(document.getElementById('access-status')?.textContent));
  await photograph(first, 'stopped-taken-over');
  await fresh.close();
});

test('a running session is not started over: Start waits until it ends, and the paired plugin is served throughout', async () => {
  const { fresh, page } = await signedInWithEveryTool();
  const { mcp } = await paired(await startSession(page));
  assert.equal(await page.evaluate(() => document.activeElement?.id), 'copy-code', 'focus goes to the next step: copying the code');
  assert.equal(await page.isDisabled('#start-session'), true, 'no second start while one runs');
  await page.waitForSelector('#session-hint:text("A session is running")');
  await page.click('#start-session', { force: true });
  for (let i = 0; i < 5; i += 1) {
    const answer = await mcp.call('list_sources');
    assert.equal(answer.isError, false, answer.text);
  }
  // Tools are named in a person's words, their ids in small print.
  assert.match(await page.textContent('fieldset label:has(input[value="search_workspace"])'), /Search your documents\s*search_workspace/);
  // Once the plugin has paired, the secret code goes out of sight until asked for.
  await page.waitForSelector('#show-code', { timeout: 15_000 });
  assert.equal(await page.isVisible('#pairing-code'), false);
  await page.click('#show-code');
  await page.waitForSelector('#pairing-code');
  // Disabled looks disabled: not the enabled button's look, nor its pointer.
  const look = () => page.evaluate(() => {
    const style = getComputedStyle(document.querySelector('#start-session'));
    return `${style.opacity} ${style.cursor} ${style.backgroundColor} ${style.color}`;
  });
  const whileRunning = await look();
  await page.click('#end-session');
  await page.waitForFunction(() => !document.querySelector('#start-session').disabled);
  const enabled = await look();
  assert.notEqual(whileRunning, enabled, `disabled: ${whileRunning}; enabled: ${enabled}`);
  assert.doesNotMatch(whileRunning, / pointer /, whileRunning);
  mcp.close();
  await fresh.close();
});

test('a plugin that pairs while the person is on another page: AI access no longer shows the code or the pairing step on return', async () => {
  const { fresh, page } = await signedInWithEveryTool();
  const code = await startSession(page);
  await go(page, '#/workspace', 'Workspace');
  const { mcp } = await paired(code);
  assert.equal((await mcp.call('list_sources')).isError, false);
  await go(page, '#/access', 'AI access');
  // Once the relay says the plugin looked the session up: no secret code, no "Next: … pair".
  await page.waitForSelector('#show-code', { timeout: 15_000 });
  assert.equal(await page.isVisible('#pairing-code'), false);
  await page.waitForFunction(() => /✓ Start a session[^✓]*\(done\)/.test(document.querySelector('#first-steps')?.textContent ?? ''), null, { timeout: 5000 });
  mcp.close();
  await fresh.close();
});

test('revoking the paired plugin\'s token ends its pairing; the step the plugin asks for recovers it', async () => {
  const { fresh, page } = await signedInWithEveryTool();
  const firstCode = await startSession(page);
  const { config, mcp } = await paired(firstCode);
  assert.equal((await mcp.call('list_sources')).isError, false);

  await go(page, '#/tokens', 'Tokens');
  // Listed as what it is: the plugin's token, not the tab's.
  assert.match(await page.textContent('tr:has-text("this tab’s pairing")'), /The sealpost plugin, paired from a browser tab/);
  await page.click('tr:has-text("this tab’s pairing") button:text-is("Revoke")');
  await page.waitForSelector('#notice:text("its pairing is gone")');
  const notice = await page.textContent('#notice');
  assert.ok(!notice.includes('`'), notice);
  // Focus stays on the page, on the next thing to revoke, not dropped to the top.
  await page.waitForFunction(() => document.activeElement !== document.body && document.querySelector('main').contains(document.activeElement));
  const told = await mcp.call('list_sources');
  assert.equal(told.isError, true);
  assert.match(told.text, /start a session and run `sealpost pair --replace` with the new code/);
  mcp.close();

  // What the plugin asks for works: a new session, a new code, `pair --replace`.
  await go(page, '#/access', 'AI access');
  await page.waitForSelector('#pairing :text("No session is running")');
  const secondCode = await startSession(page);
  assert.notEqual(secondCode, firstCode, 'a new pairing, not the dead one');
  const replaced = await pairPlugin(config, secondCode, ['--replace']);
  assert.equal(replaced.status, 0, replaced.output);
  const again = new McpClient(config);
  await again.initialize();
  const answer = await again.call('list_sources');
  assert.equal(answer.isError, false, answer.text);
  again.close();
  await fresh.close();
});

test('review shows a change with a little context, Approve at the top, and the count of waiting proposals', async () => {
  const fresh = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await openPage(fresh, await relay.newSigninUrl());
  await signedIn(page);
  const lines = Array.from({ length: 300 }, (_, i) => `Line ${i + 1} of the long journal.`);
  const folder = writeFolder({ 'journal/long.md': `# Long journal\n\n${lines.join('\n')}\n` });
  await page.fill('#source-name', 'journal');
  await page.setInputFiles('#pick-folder', join(folder, 'journal'));
  await page.waitForSelector('#import-status:text("Imported 1 files into journal.")');
  await go(page, '#/access', 'AI access');
  await page.check('#access-on');
  await page.check('input[name="grant-source"][value="journal"]');
  for (const box of await page.$$('input[name="grant-tool"]')) await box.check();
  await page.click('#save-grants');
  const { mcp } = await paired(await startSession(page));
  const found = await mcp.call('search_workspace', { query: 'journal' });
  const docId = found.text.match(/(d_[0-9a-f]{24})/)[1];
  const proposed = await mcp.call('propose_append_note', { doc_id: docId, text: 'One more line.' });
  assert.equal(proposed.isError, false, proposed.text);
  const second = await mcp.call('propose_create_note', { source: 'journal', title: 'Later', body: 'later\n' });
  assert.equal(second.isError, false, second.text);
  await page.waitForSelector('nav a[href="#/review"]:text-is("Review (2)")');
  await go(page, '#/review', 'Review');
  const byline = await page.textContent('main article p.muted');
  assert.doesNotMatch(byline, /\([^)]*\(/, `no brackets within brackets: ${byline}`);
  const diff = await page.textContent('article pre.diff');
  assert.match(diff, /\+ One more line\./);
  assert.match(diff, /unchanged lines/);
  // An append removes nothing: no struck-out line for the note's final newline.
  assert.equal(await page.locator('main article').first().locator('pre.diff del').count(), 0, diff);
  assert.ok(diff.split('\n').length < 10, `a few lines, not the whole note: ${diff.length} characters`);
  assert.ok(await page.evaluate(() => {
    const article = document.querySelector('main article');
    const approve = [...article.querySelectorAll('button')].find((b) => b.textContent === 'Approve');
    return Boolean(approve.compareDocumentPosition(article.querySelector('pre.diff')) & Node.DOCUMENT_POSITION_FOLLOWING);
  }), 'Approve comes before the diff');
  // Deciding one moves focus to the next one waiting, then to the page once none is left.
  await page.click('article button:text-is("Approve")');
  await page.waitForSelector('nav a[href="#/review"]:text-is("Review (1)")');
  await page.waitForFunction(() => document.activeElement?.matches('main article .approve'));
  await page.keyboard.press('Enter');
  await page.waitForSelector('nav a[href="#/review"]:text-is("Review")');
  await page.waitForFunction(() => document.activeElement?.id === 'main');
  mcp.close();
  await fresh.close();
});

test('an import keeps the source it went into, and does not pull the person back to Workspace', async () => {
  const fresh = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await openPage(fresh, await relay.newSigninUrl());
  await signedIn(page);
  const first = writeFolder({ 'alpha/a.md': '# A\nalpha\n' });
  await page.fill('#source-name', 'alpha');
  await page.setInputFiles('#pick-folder', join(first, 'alpha'));
  await page.waitForSelector('#import-status:text("Imported 1 files into alpha.")');
  assert.equal(await page.textContent('#docs-heading'), 'Documents (1) in 1 source');
  const second = writeFolder({ 'zeta/z.md': '# Z\nzeta\n' });
  await page.fill('#source-name', 'zeta');
  await page.setInputFiles('#pick-folder', join(second, 'zeta'));
  await page.waitForSelector('#import-status:text("Imported 1 files into zeta.")');
  assert.equal(await page.inputValue('#source-name'), 'zeta', 'the next folder goes where the last one went');
  assert.equal(await page.evaluate(() => document.activeElement?.id), 'filter', 'focus goes to the documents just imported');
  // A text file's `# ` line is not a heading: its title is its name.
  const text = writeFolder({ 'zeta/plain.txt': '#\n# not a heading\nplain text\n' });
  await page.setInputFiles('#pick-folder', join(text, 'zeta'));
  await page.waitForSelector('#import-status:text("Imported 1 files into zeta.")');
  await page.waitForSelector('main table a:text-is("plain")');

  // A big import still running while the person moves to AI access: they stay there.
  const many = writeFolder(Object.fromEntries(Array.from({ length: 400 }, (_, i) => [`many/n${i}.md`, `# N${i}\n${'text '.repeat(200)}\n`])));
  await page.fill('#source-name', 'many');
  await page.setInputFiles('#pick-folder', join(many, 'many'));
  await go(page, '#/access', 'AI access');
  await page.waitForTimeout(5000);
  assert.equal(await page.textContent('main h2'), 'AI access');
  await go(page, '#/workspace', 'Workspace');
  await page.waitForSelector('#import-status:text("Imported 400 files into many.")', { timeout: 60_000 });
  await fresh.close();
});

test('the status counters add up: each call is answered, answered with the tool\'s error, or refused', async () => {
  const { fresh, page } = await signedInWithEveryTool();
  const { mcp } = await paired(await startSession(page));
  assert.equal((await mcp.call('list_sources')).isError, false);
  const missing = await mcp.call('get_source_excerpt', { doc_id: 'd_000000000000000000000000' });
  const refused = await mcp.call('search_workspace', { query: 7 });
  assert.equal(missing.isError, true, missing.text);
  assert.equal(refused.isError, true, refused.text);
  const row = async (label) => page.evaluate((label) => [...document.querySelectorAll('#access-status tr')]
    .find((tr) => tr.querySelector('th')?.textContent === label)?.querySelector('td')?.textContent, label);
  await page.waitForFunction(() => document.querySelectorAll('#timeline li').length === 3);
  const counts = [await row('Calls answered'), await row('Answered with the tool\u2019s error'), await row('Calls refused or not delivered')];
  assert.deepEqual(counts, ['1', '1', '1']);
  // Tools are named in a person's words here too, not by their ids.
  const recent = await page.textContent('#timeline');
  assert.match(recent, /See the names of your sources/);
  assert.doesNotMatch(recent, /list_sources|search_workspace/, recent);
  await go(page, '#/activity', 'Activity');
  await page.waitForSelector('td:text("answered: the tool reported an error")');
  const filter = await page.$$eval('#filter-tool option', (options) => options.map((o) => `${o.value}=${o.textContent}`));
  assert.ok(filter.includes('search_workspace=Search your documents'), filter.join(', '));
  mcp.close();
  await fresh.close();
});

// The words of the app's own table cells (headings, states, buttons) that the layout breaks over
// two lines. Text of the person's or a page's making (`.free`, links) may break anywhere.
function wordsBrokenInTables(page) {
  return page.evaluate(() => {
    const broken = [];
    for (const cell of document.querySelectorAll('main th, main td')) {
      const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        if (node.parentElement.closest('.free, a')) continue;
        // A hyphen is a place to break ("sign-/in"), as in print.
        for (const word of node.data.matchAll(/[^\s-]+/g)) {
          const range = document.createRange();
          range.setStart(node, word.index);
          range.setEnd(node, word.index + word[0].length);
          const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
          if (lines.size > 1) broken.push(word[0]);
        }
      }
    }
    return broken;
  });
}

test('no page overflows sideways on a phone (390 × 844) or a laptop (1280 × 800), nor breaks a table\'s words', async () => {
  const fresh = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await openPage(fresh, await relay.newSigninUrl());
  await signedIn(page);
  const long = 'a-very-long-unbroken-word-'.repeat(12);
  const folder = writeFolder({ 'notes/n.md': `# A note with a rather long title that goes on and on ${long}\n\nbody ${long}\n` });
  await page.fill('#source-name', 'notes');
  await page.setInputFiles('#pick-folder', join(folder, 'notes'));
  await page.waitForSelector('#import-status:text("Imported 1 files into notes.")');
  await go(page, '#/access', 'AI access');
  await page.check('#access-on');
  await page.check('input[name="grant-source"][value="notes"]');
  for (const box of await page.$$('input[name="grant-tool"]')) await box.check();
  await page.click('#save-grants');
  const { mcp } = await paired(await startSession(page));
  const found = await mcp.call('search_workspace', { query: 'note' });
  const docId = found.text.match(/(d_[0-9a-f]{24})/)[1];
  await mcp.call('propose_append_note', { doc_id: docId, text: `appended ${long}` });
  const pages = [['#/workspace', 'Workspace'], ['#/access', 'AI access'], ['#/review', 'Review'], ['#/activity', 'Activity'], ['#/tokens', 'Tokens'], ['#/leaves', 'What leaves this tab']];
  const overflowing = [];
  const split = [];
  for (const [width, height] of [[1280, 800], [390, 844]]) {
    await page.setViewportSize({ width, height });
    for (const [route, heading] of pages) {
      await page.evaluate((route) => { location.hash = route; }, route);
      await page.waitForSelector(`main h2:text-is("${heading}")`);
      await page.waitForTimeout(200);
      const wide = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      if (wide > 0) overflowing.push(`${route} at ${width} px: ${wide} px too wide`);
      for (const word of await wordsBrokenInTables(page)) split.push(`${route} at ${width} px: ${word}`);
    }
  }
  assert.deepEqual(overflowing, []);
  assert.deepEqual(split, [], 'a table breaks no word of its own over two lines');
  mcp.close();
  await fresh.close();
});

test('a notice belongs to its page: moving to another page clears it', async () => {
  const page = await openPage(context, await relay.newSigninUrl());
  await signedIn(page);
  await go(page, '#/access', 'AI access');
  await page.click('#save-grants');
  await page.waitForSelector('#notice:not([hidden])');
  await go(page, '#/review', 'Review');
  assert.equal(await page.isVisible('#notice'), false, `still shown: ${await page.textContent('#notice')}`);
  await page.close();
});

test('a used sign-in link is refused once, in plain words that say what to do', async () => {
  const link = await relay.newSigninUrl();
  const first = await browser.newContext();
  const page = await openPage(first, link);
  await signedIn(page);
  await first.close();
  const second = await browser.newContext();
  const again = await openPage(second, link);
  await again.waitForSelector('#notice:not([hidden])');
  const notice = await again.textContent('#notice');
  assert.ok(/unknown, used or expired/.test(notice), notice);
  assert.equal((notice.match(/new (one|link)/g) ?? []).length, 1, `one request for a new link: ${notice}`);
  assert.ok(notice.includes('sealpost-relay owner link'), notice);
  // The help beneath says what the notice does not, once, and which command is for whom.
  const help = await again.textContent('#signin-help');
  assert.equal((`${notice} ${help}`.match(/works once/g) ?? []).length, 1, `${notice} | ${help}`);
  assert.match(help, /owner link NAME[^.;]*already/, help);
  assert.match(help, /owner add NAME[^.;]*new/, help);
  await second.close();
});

test('a session running out is announced on every page, extends without pairing again, and ends without its code', async () => {
  const { fresh, page } = await signedInWithEveryTool();
  // A 20-second session (the page offers 15 minutes and up; a person's choice is kept as made).
  await page.evaluate(() => {
    const select = document.getElementById('ttl');
    select.append(new Option('20 seconds', '20'));
  });
  await page.selectOption('#ttl', '20');
  const code = await startSession(page);
  const { mcp } = await paired(code);
  assert.equal((await mcp.call('list_sources')).isError, false);
  await go(page, '#/workspace', 'Workspace');
  // Warned a quarter of the length before the end, on whatever page the person is.
  await page.waitForSelector('#session-warning:not([hidden])', { timeout: 30_000 });
  assert.match(await page.textContent('#session-warning'), /The AI session ends at .*Extend by 20 seconds/);
  assert.equal(await page.textContent('#status-pill'), 'Serving, ending soon', 'the pill and the warning agree');
  await photograph(page, 'session-expiry-warning');
  await page.click('#extend-session');
  await page.waitForSelector('#session-warning', { state: 'hidden' });
  // Said once the tab serves the new session.
  await page.waitForSelector('#notice:text("Session extended")');
  assert.match(await page.textContent('#notice'), /Session extended: it now ends at .* without pairing again/);
  // The plugin carries on into the new session, unpaired from nothing: the same pairing.
  for (let i = 0; i < 3; i += 1) {
    const answer = await mcp.call('list_sources');
    assert.equal(answer.isError, false, answer.text);
  }
  assert.equal(await page.textContent('#status-pill'), 'Serving');
  await go(page, '#/access', 'AI access');
  // Then it runs out: the code goes with it, and the chosen length stays chosen.
  await page.waitForSelector('#notice:text("its time ran out")', { timeout: 40_000 });
  await page.waitForFunction(() => /No session is running/.test(document.getElementById('pairing').textContent));
  assert.equal(await page.isVisible('#pairing-code'), false);
  assert.equal(await page.isVisible('#show-code'), false);
  // The pill, the status and the buttons say the same thing, and why.
  assert.equal(await page.textContent('#status-pill'), 'Not serving');
  await page.waitForFunction(() => /Not serving: the session’s time ran out/.test(document.getElementById('access-status').textContent));
  await photograph(page, 'stopped-expired');
  await go(page, '#/workspace', 'Workspace');
  await go(page, '#/access', 'AI access');
  assert.equal(await page.inputValue('#ttl'), '20');
  assert.equal(await page.isDisabled('#start-session'), false);
  const after = await mcp.call('list_sources');
  assert.equal(after.isError, true, 'no session: the agent is told so');
  mcp.close();
  await fresh.close();
});

test('a new workspace shows the three steps to a first answer, and AI access what is left, in order', async () => {
  const fresh = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await openPage(fresh, await relay.newSigninUrl());
  await signedIn(page);
  const steps = async () => page.$$eval('#first-steps li', (items) => items.map((item) => item.textContent.trim()));
  let shown = await steps();
  assert.equal(shown.length, 3);
  assert.match(shown[0], /^Next: Import your notes/);
  assert.doesNotMatch(shown[1], /done|Next/);
  await photograph(page, 'first-run-workspace');

  await go(page, '#/access', 'AI access');
  assert.match((await steps())[0], /^Next: Import your notes/);
  // The next step links to where it is done.
  await page.click('#first-steps a[href="#/workspace"]');
  await page.waitForSelector('main h2:text-is("Workspace")');
  const folder = writeFolder({ 'notes/a.md': '# A\n\nalpha\n' });
  await page.setInputFiles('#pick-folder', join(folder, 'notes'));
  await page.waitForSelector('#import-status:text("Imported 1 files")');
  assert.equal(await page.$('#first-steps'), null, 'a workspace with documents is not new');
  // The next step is one Tab from where the import left the keyboard, not one past every document.
  await page.waitForFunction(() => document.activeElement?.id === 'filter');
  await page.keyboard.press('Tab');
  assert.ok(await page.evaluate(() => document.activeElement?.matches('#import-next a[href="#/access"]')), 'the next step is the next Tab');
  assert.match(await page.textContent('#import-next'), /^Next: Choose what an AI agent may use/);

  await go(page, '#/access', 'AI access');
  shown = await steps();
  assert.match(shown[0], /^✓ Import your notes.*\(done\)$/);
  assert.match(shown[1], /^Next: Choose what an AI agent may use/);
  await page.check('#access-on');
  await page.check('input[name="grant-tool"][value="list_sources"]');
  await page.click('#save-grants');
  await page.waitForFunction(() => /Next: Start a session/.test(document.getElementById('first-steps')?.textContent));
  const { mcp } = await paired(await startSession(page));
  assert.equal((await mcp.call('list_sources')).isError, false);
  // Once the plugin has been seen, nothing is left to do: the card goes.
  await page.waitForSelector('#first-steps', { state: 'detached', timeout: 20_000 });
  mcp.close();
  await fresh.close();
});

test('a document opens to be read, in a fixed-width font; editing is a step of its own', async () => {
  const fresh = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await openPage(fresh, await relay.newSigninUrl());
  await signedIn(page);
  // Focused, the skip link does not cover the logo.
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.className), 'skip');
  const [skip, logo] = await Promise.all(['.skip', 'header h1'].map((s) => page.locator(s).boundingBox()));
  assert.ok(skip.y + skip.height <= logo.y || logo.y + logo.height <= skip.y, `skip link ${JSON.stringify(skip)} over the logo ${JSON.stringify(logo)}`);

  const folder = writeFolder({ 'notes/plan.md': '# Plan\n\n- first\n- second\n' });
  await page.setInputFiles('#pick-folder', join(folder, 'notes'));
  await page.waitForSelector('#import-status:text("Imported 1 files")');
  await page.click('td a:text-is("Plan")');
  await page.waitForSelector('#document-text');
  assert.equal(await page.$('textarea'), null, 'read, not edited');
  assert.match(await page.textContent('#document-text'), /- first\n- second/);
  assert.match(await page.$eval('#document-text', (el) => getComputedStyle(el).fontFamily), /mono/);
  assert.equal(await page.evaluate(() => document.activeElement.id), 'edit-document');
  await page.click('#edit-document');
  await page.fill('#doc-body', '# Plan\n\n- first\n- second\n- third\n');
  await page.click('button:text-is("Save")');
  await page.waitForSelector('#document-text:text("- third")');
  await photograph(page, 'document');
  await fresh.close();
});
