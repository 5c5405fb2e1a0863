// The browser module through its page API, as a host app uses it: a fixture page on the relay's
// own origin (web/tests/host/), a real relay, the real `sealpost` plugin over stdio. Each stop
// condition, a call that does not open, the relay going away and coming back, host tools that
// throw or hang, two tabs on one pairing, and damaged IndexedDB records.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  startRelay, launchBrowser, openPage, tempDir, pairPlugin, McpClient, webWithHostFixture, api, decodePairingCode,
} from './harness.mjs';

// Below the claim's 25 s long-poll: a stop that waited for the long-poll to end would miss it.
const AT_ONCE_MS = 10_000;

let relay;
let browser;
let context;

before(async () => {
  relay = await startRelay({ web: webWithHostFixture() });
  browser = await launchBrowser();
  context = await browser.newContext();
});

after(async () => {
  await browser?.close();
  await relay?.stop();
});

async function hostPage() {
  const page = await openPage(context, `${relay.base}/host/index.html`);
  page.on('pageerror', (error) => page.consoleErrors.push(error.message));
  await page.waitForSelector('html[data-ready="yes"]');
  return page;
}

// Opens the module in `page` as `window.tabs[name]`; answers what it restored.
async function openTab(page, name, workspace, token) {
  const ownerToken = token ?? await relay.ownerToken();
  const restored = await page.evaluate(async ({ name, ownerToken, workspace }) => {
    window.tabs ??= {};
    window.tabs[name] = await window.openTab({ ownerToken, workspace });
    return window.tabs[name].restored;
  }, { name, ownerToken, workspace });
  return { restored, ownerToken };
}

function tabCall(page, name, method, ...args) {
  return page.evaluate(({ name, method, args }) => window.tabs[name][method](...args), { name, method, args });
}

// Starts serving without waiting; `served(page, name)` waits for the reason it stopped.
function serve(page, name, options = {}) {
  return page.evaluate(({ name, options }) => { window.tabs[name].served = window.tabs[name].serve(options); }, { name, options });
}

function served(page, name, withinMs = 60_000) {
  return page.evaluate(({ name, withinMs }) => Promise.race([
    window.tabs[name].served,
    new Promise((resolve) => setTimeout(() => resolve('still serving'), withinMs)),
  ]), { name, withinMs });
}

function waitEvent(page, name, type, timeout = 30_000) {
  return page.waitForFunction(({ name, type }) => window.tabs[name].events.some((e) => e.type === type), { name, type }, { timeout });
}

function transports(page, name) {
  return page.evaluate((name) => window.tabs[name].events.filter((e) => e.type === 'transport').map((e) => e.transport), name);
}

function stops(page, name) {
  return page.evaluate((name) => window.tabs[name].events.filter((e) => e.type === 'stopped').map((e) => e.reason), name);
}

async function grantEverything(page, name) {
  await tabCall(page, name, 'addSource', 'notes');
  await tabCall(page, name, 'putDocuments', [
    { id: 'd_rotation', source: 'notes', title: 'Key rotation', body: 'Rotate the signing keys every ninety days.', updated_at_ms: 1 },
  ]);
  const tools = (await tabCall(page, name, 'allTools')).map((t) => t.name);
  await tabCall(page, name, 'setGrants', { access: 'on', sources: ['notes'], tools });
}

async function pairedClient(code) {
  const config = tempDir('sealpost-module-plugin-');
  const result = await pairPlugin(config, code);
  assert.equal(result.status, 0, result.output);
  const mcp = new McpClient(config);
  await mcp.initialize();
  return mcp;
}

// A call envelope whose header is sound but whose ciphertext is random: it cannot open.
function unopenableEnvelope(sessionId) {
  const header = Buffer.alloc(82);
  header[0] = 1;
  header[1] = 1;
  Buffer.from(sessionId, 'base64url').copy(header, 2);
  const callId = randomBytes(16);
  callId.copy(header, 18);
  randomBytes(32).copy(header, 34);
  const now = BigInt(Date.now());
  header.writeBigUInt64BE(now, 66);
  header.writeBigUInt64BE(now + 60_000n, 74);
  const envelope = Buffer.concat([header, randomBytes(24), randomBytes(48)]);
  return { callId: callId.toString('base64url'), envelope: envelope.toString('base64url') };
}

test('a call the plugin sealed is answered; what cannot be answered is refused or cancelled; the loop survives the relay going away', async () => {
  const page = await hostPage();
  await openTab(page, 'a', 'calls');
  await page.evaluate(async () => {
    const tab = window.tabs.a;
    await tab.registerTool({ name: 'host_throws', description: 'Throws.', inputSchema: { type: 'object' }, kind: 'read' },
      () => { throw new Error('the host app broke'); });
    await tab.registerTool({ name: 'host_hangs', description: 'Never answers.', inputSchema: { type: 'object' }, kind: 'read' },
      () => new Promise(() => {}));
    await tab.registerTool({ name: 'host_echo', description: 'Echoes.', inputSchema: { type: 'object', properties: { say: { type: 'string' } }, required: ['say'] }, kind: 'read' },
      (args) => `echo: ${args.say}`);
  });
  await grantEverything(page, 'a');
  const started = await tabCall(page, 'a', 'startSession', 3600);
  await serve(page, 'a');
  const mcp = await pairedClient(started.pairingCode);

  const found = await mcp.call('search_workspace', { query: 'rotation' });
  assert.equal(found.isError, false, found.text);
  assert.ok(found.text.includes('Key rotation'), found.text);
  assert.deepEqual(await transports(page, 'a'), ['channel'], 'the loop serves over the session channel');
  const echoed = await mcp.call('host_echo', { say: 'hello' });
  assert.equal(echoed.isError, false, echoed.text);
  assert.ok(echoed.text.includes('echo: hello'), echoed.text);
  // A renewed owner token: the tab opens its channel again with it at once, no HTTP meanwhile.
  await page.evaluate(() => window.tabs.a.setOwnerToken(window.tabs.a.ownerToken));
  const renewed = await mcp.call('host_echo', { say: 'renewed' });
  assert.equal(renewed.isError, false, renewed.text);
  assert.deepEqual(await transports(page, 'a'), ['channel'], 'a new token does not cost the channel');
  const badArgs = await mcp.call('host_echo', { say: 7 });
  assert.equal(badArgs.isError, true, 'the executor checks a host tool\'s schema before its handler runs');

  const threw = await mcp.call('host_throws');
  assert.equal(threw.isError, true);
  assert.ok(threw.text.includes('failed in the Sealpost tab'), threw.text);
  const hung = await mcp.call('host_hangs');
  assert.equal(hung.isError, true);
  assert.ok(hung.text.includes('failed in the Sealpost tab'), hung.text);

  // An envelope that does not open is cancelled with its reason, and serving goes on.
  const { origin, mcpToken } = decodePairingCode(started.pairingCode);
  assert.equal(origin, relay.base);
  const pairId = (await tabCall(page, 'a', 'pairing')).pairId;
  const session = await api(relay.base, 'GET', `/v1/pairings/${pairId}/session`, { token: mcpToken });
  assert.equal(session.status, 200, JSON.stringify(session.body));
  const bad = unopenableEnvelope(session.body.session_id);
  const posted = await api(relay.base, 'POST', `/v1/sessions/${session.body.session_id}/calls`, { token: mcpToken, body: { call_id: bad.callId, envelope: bad.envelope, ttl_s: 60 } });
  assert.equal(posted.status, 201, JSON.stringify(posted.body));
  const outcome = await api(relay.base, 'GET', `/v1/calls/${bad.callId}?wait_ms=20000`, { token: mcpToken });
  assert.equal(outcome.body.state, 'cancelled', JSON.stringify(outcome.body));
  assert.equal(outcome.body.reason, 'undecryptable');
  assert.equal((await mcp.call('list_sources')).isError, false, 'serving goes on after a cancel');

  // The relay goes away: the loop backs off and says so; it comes back: calls are answered.
  await relay.down();
  await waitEvent(page, 'a', 'retrying');
  await relay.up();
  const after = await mcp.call('search_workspace', { query: 'rotation' });
  assert.equal(after.isError, false, after.text);
  // The channel closed with the relay: the loop went on over HTTP.
  assert.deepEqual(await transports(page, 'a'), ['channel', 'http'], 'the loop fell back to HTTP');
  assert.deepEqual(await stops(page, 'a'), [], 'the relay going away is not a stop');
  mcp.close();
  assert.deepEqual(page.cspViolations, []);
  assert.deepEqual(page.consoleErrors, []);
});

test('every stop condition stops the loop and says which', async () => {
  const page = await hostPage();
  const cases = [
    ['locked', (name) => tabCall(page, name, 'lock')],
    ['signed_out', (name) => tabCall(page, name, 'stop', 'signed_out')],
    ['session_ended', (name) => tabCall(page, name, 'endSession')],
    ['expired', null],
  ];
  for (const [reason, act] of cases) {
    await openTab(page, reason, `stop-${reason}`);
    await tabCall(page, reason, 'startSession', act ? 3600 : 2);
    await serve(page, reason);
    await waitEvent(page, reason, 'serving');
    if (act) await act(reason);
    assert.equal(await served(page, reason, act ? AT_ONCE_MS : AT_ONCE_MS + 2000), reason);
    assert.deepEqual(await stops(page, reason), [reason]);
  }

  // The owner token signed out elsewhere: the next claim is refused and the loop says so.
  const { ownerToken } = await openTab(page, 'revoked', 'stop-revoked');
  await tabCall(page, 'revoked', 'startSession', 3600);
  await serve(page, 'revoked');
  await waitEvent(page, 'revoked', 'serving');
  assert.equal((await api(relay.base, 'POST', '/v1/auth/signout', { token: ownerToken })).status, 204);
  assert.equal(await served(page, 'revoked'), 'token_revoked');
  assert.deepEqual(await stops(page, 'revoked'), ['token_revoked']);
});

test('one tab serves a pairing; another sees it and takes over, and the first stops at once', async () => {
  const first = await hostPage();
  const second = await hostPage();
  const { ownerToken } = await openTab(first, 'a', 'shared');
  const started = await tabCall(first, 'a', 'startSession', 3600);
  await serve(first, 'a');
  await waitEvent(first, 'a', 'serving');

  const { restored } = await openTab(second, 'b', 'shared', ownerToken);
  assert.equal(restored.pairing?.pairingCode, started.pairingCode, 'the pairing is remembered across tabs');
  assert.equal(await tabCall(second, 'b', 'serve'), 'served_elsewhere');
  // Without a session of its own, a tab serves nothing and takes nothing away.
  assert.equal(await tabCall(second, 'b', 'serve', { takeOver: true }), 'session_ended');
  assert.equal(await served(first, 'a', 500), 'still serving', 'the serving tab goes on');

  await tabCall(second, 'b', 'startSession', 3600);
  await serve(second, 'b', { takeOver: true });
  // Its new session ended the first tab's at the relay, and it took the lock: the first stops
  // for whichever it hears of first, and the second serves.
  assert.match(await served(first, 'a', AT_ONCE_MS), /^(taken_over|session_ended)$/);
  await waitEvent(second, 'b', 'serving');
});

test('a damaged or foreign IndexedDB record is reported and skipped, and nothing else is lost', async () => {
  const page = await hostPage();
  const { ownerToken } = await openTab(page, 'a', 'damaged');
  await tabCall(page, 'a', 'addSource', 'notes');
  await tabCall(page, 'a', 'putDocuments', [
    { id: 'd_one', source: 'notes', title: 'One', body: 'first', updated_at_ms: 1 },
    { id: 'd_two', source: 'notes', title: 'Two', body: 'second', updated_at_ms: 2 },
  ]);
  await tabCall(page, 'a', 'setGrants', { access: 'on', sources: ['notes'], tools: ['search_workspace'] });
  await tabCall(page, 'a', 'startSession', 3600);
  await tabCall(page, 'a', 'endSession');
  const audited = (await tabCall(page, 'a', 'auditLog')).entries.length;
  await openTab(page, 'other', 'elsewhere', ownerToken);
  await tabCall(page, 'other', 'startSession', 3600);
  await page.evaluate(() => { window.tabs.a.close(); window.tabs.other.close(); });

  // Damage: a pairing record that does not open, a document that is not one, an audit entry
  // sealed by another workspace's key (foreign), and one that is not a record at all.
  await page.evaluate(async () => {
    const open = (name) => new Promise((ok, fail) => { const r = indexedDB.open(name); r.onsuccess = () => ok(r.result); r.onerror = () => fail(r.error); });
    const done = (tx) => new Promise((ok, fail) => { tx.oncomplete = ok; tx.onerror = () => fail(tx.error); });
    const get = (req) => new Promise((ok) => { req.onsuccess = () => ok(req.result); });
    const damaged = await open('sealpost-damaged');
    const foreign = await open('sealpost-elsewhere');
    const foreignPairing = await get(foreign.transaction('sealed').objectStore('sealed').get('pairing'));
    const tx = damaged.transaction(['sealed', 'documents', 'audit'], 'readwrite');
    tx.objectStore('sealed').put({ v: 1, iv: new Uint8Array(12), sealed: new Uint8Array(40) }, 'pairing');
    tx.objectStore('documents').put({ id: 'd_bad', source: 7 });
    tx.objectStore('documents').put({ id: '', source: 'notes', title: 'No id', body: 'an id the workspace refuses', updated_at_ms: 3 });
    tx.objectStore('audit').add({ ...foreignPairing });
    tx.objectStore('audit').add('not a record');
    await done(tx);
    damaged.close();
    foreign.close();
  });

  const { restored } = await openTab(page, 'again', 'damaged', ownerToken);
  assert.equal(restored.pairing, null, 'the damaged pairing is skipped');
  assert.ok(restored.problems.some((p) => p.includes('pairing could not be read')), JSON.stringify(restored.problems));
  assert.ok(restored.problems.some((p) => p.includes('document was damaged')), JSON.stringify(restored.problems));
  assert.ok(restored.problems.some((p) => p.includes('could not be restored') && p.includes('document id')), JSON.stringify(restored.problems));
  assert.deepEqual(restored.documents.map((d) => d.id).sort(), ['d_one', 'd_two']);
  assert.deepEqual(restored.grants.sources, ['notes']);
  const log = await tabCall(page, 'again', 'auditLog');
  assert.equal(log.entries.length, audited);
  assert.equal(log.unreadable, 2);

  // It goes on working: a new pairing, a session, serving.
  await tabCall(page, 'again', 'startSession', 3600);
  await serve(page, 'again');
  await waitEvent(page, 'again', 'serving');
  await tabCall(page, 'again', 'endSession');
  assert.equal(await served(page, 'again', AT_ONCE_MS), 'session_ended');
});

test('a passphrase protects the workspace at rest: nothing readable without it, everything back with it', async () => {
  const page = await hostPage();
  const { ownerToken } = await openTab(page, 'a', 'secret');
  await tabCall(page, 'a', 'addSource', 'notes');
  await tabCall(page, 'a', 'putDocuments', [{ id: 'notes/salary.md', source: 'notes', title: 'Salary review', body: 'The salary bands are confidential.', updated_at_ms: 1 }]);
  const started = await tabCall(page, 'a', 'startSession', 3600);
  await tabCall(page, 'a', 'endSession');
  await assert.rejects(tabCall(page, 'a', 'setPassphrase', 'short'), /at least 8 characters/);
  assert.equal(await tabCall(page, 'a', 'setPassphrase', 'correct horse battery'), true);
  await tabCall(page, 'a', 'saveIndex');
  await page.evaluate(() => window.tabs.a.close());

  // What IndexedDB holds: no title, body or path in any document record.
  const stored = await page.evaluate(async () => {
    const db = await new Promise((ok) => { const r = indexedDB.open('sealpost-secret'); r.onsuccess = () => ok(r.result); });
    const records = await new Promise((ok) => { const r = db.transaction('documents').objectStore('documents').getAll(); r.onsuccess = () => ok(r.result); });
    const index = await new Promise((ok) => { const r = db.transaction('sealed').objectStore('sealed').get('index'); r.onsuccess = () => ok(r.result); });
    db.close();
    return [...records, { id: 'index', ...index }].map((r) => ({ id: r.id, fields: Object.keys(r).sort(), text: new TextDecoder().decode(r.sealed ?? new Uint8Array()) }));
  });
  // The search index snapshot holds every document's terms: it is sealed under the passphrase too.
  const index = stored.pop();
  assert.deepEqual(index.fields, ['id', 'iv', 'sealed', 'v']);
  assert.ok(!/salari|band|confidenti/.test(index.text));
  assert.equal(stored.length, 1);
  assert.match(stored[0].id, /^h_[0-9a-f]{64}$/);
  assert.deepEqual(stored[0].fields, ['id', 'iv', 'sealed', 'v']);
  assert.ok(!stored[0].text.includes('salary'));

  const opening = (passphrase) => page.evaluate(async ({ ownerToken, passphrase }) => {
    try { await window.Sealpost.open({ ownerToken, workspace: 'secret', passphrase }); return 'opened'; } catch (error) { return error.code; }
  }, { ownerToken, passphrase });
  assert.equal(await opening(undefined), 'passphrase_required');
  assert.equal(await opening('wrong horse battery'), 'wrong_passphrase');

  const page2 = await hostPage();
  const restored = await page2.evaluate(async ({ ownerToken }) => {
    window.tabs = { b: await window.openTab({ ownerToken, workspace: 'secret', passphrase: 'correct horse battery' }) };
    return window.tabs.b.restored;
  }, { ownerToken });
  assert.equal(restored.passphrase, true);
  assert.deepEqual(restored.problems, []);
  assert.equal(restored.index.from, 'snapshot', 'the snapshot opens under the passphrase key');
  assert.equal(restored.pairing?.pairingCode, started.pairingCode, 'the pairing survives');
  assert.equal((await tabCall(page2, 'b', 'document', 'notes/salary.md')).body, 'The salary bands are confidential.');

  // Locked, nothing sealed opens until the passphrase is given again.
  await tabCall(page2, 'b', 'lock');
  await assert.rejects(tabCall(page2, 'b', 'auditLog'), /passphrase/);
  await tabCall(page2, 'b', 'unlock', 'correct horse battery');
  await tabCall(page2, 'b', 'auditLog');

  // Back to the device key: opens without a passphrase, with nothing lost.
  assert.equal(await tabCall(page2, 'b', 'setPassphrase', null), false);
  await page2.evaluate(() => window.tabs.b.close());
  assert.equal(await opening(undefined), 'opened');
});

// Damages the search index snapshot of workspace `name` in place: opened with the device key
// (usable by the page, never readable), one byte in the middle flipped, sealed again, so the
// record opens and it is the module that must notice.
async function damageIndexSnapshot(page, name) {
  await page.evaluate(async (name) => {
    const db = await new Promise((ok, fail) => { const r = indexedDB.open(`sealpost-${name}`); r.onsuccess = () => ok(r.result); r.onerror = () => fail(r.error); });
    const get = (store, key) => new Promise((ok) => { const r = db.transaction(store).objectStore(store).get(key); r.onsuccess = () => ok(r.result); });
    const key = await get('keys', 'sealing');
    const record = await get('sealed', 'index');
    const additionalData = new TextEncoder().encode('index');
    const bytes = new Uint8Array(await crypto.subtle.decrypt({ name: 'AES-GCM', iv: record.iv, additionalData }, key, record.sealed));
    bytes[bytes.length >> 1] ^= 0xff;
    const iv = crypto.getRandomValues(new Uint8Array(12));
    const sealed = new Uint8Array(await crypto.subtle.encrypt({ name: 'AES-GCM', iv, additionalData }, key, bytes));
    const tx = db.transaction('sealed', 'readwrite');
    tx.objectStore('sealed').put({ v: 1, iv, sealed }, 'index');
    await new Promise((ok) => { tx.oncomplete = ok; });
    db.close();
  }, name);
}

// Changes a stored document's body behind the module's back (device key: documents are kept
// as they are), as another tab of an older build might.
async function rewriteDocument(page, name, id, body) {
  await page.evaluate(async ({ name, id, body }) => {
    const db = await new Promise((ok) => { const r = indexedDB.open(`sealpost-${name}`); r.onsuccess = () => ok(r.result); });
    const tx = db.transaction('documents', 'readwrite');
    const store = tx.objectStore('documents');
    const doc = await new Promise((ok) => { const r = store.get(id); r.onsuccess = () => ok(r.result); });
    store.put({ ...doc, body });
    await new Promise((ok) => { tx.oncomplete = ok; });
    db.close();
  }, { name, id, body });
}

// Waits until the relay has seen tab `name` claim in the session `started` began: the plugin
// answers "the tab is not open" at once, without waiting, to a call before that.
async function claimerSeen(page, name, started) {
  const { mcpToken } = decodePairingCode(started.pairingCode);
  const pairId = (await tabCall(page, name, 'pairing')).pairId;
  for (let attempt = 0; attempt < 200; attempt += 1) {
    const session = await api(relay.base, 'GET', `/v1/pairings/${pairId}/session`, { token: mcpToken });
    if (session.body?.claimer_seen_at) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.fail(`tab ${name} never claimed`);
}

test('a reload starts from the search index snapshot; a damaged or out-of-date one is reported and the documents are indexed again', async (t) => {
  // The search goes through the real plugin, so it is the tab's own index that answers. The
  // plugin is closed however the test ends, or a failure would leave the run waiting on it.
  let mcp = null;
  t.after(() => mcp?.close());
  const page = await hostPage();
  const { restored: fresh, ownerToken } = await openTab(page, 'a', 'snapshot');
  assert.deepEqual(fresh.index, { from: 'documents', reason: null, message: null }, 'nothing kept yet');
  await grantEverything(page, 'a');
  await tabCall(page, 'a', 'putDocuments', [
    { id: 'd_backup', source: 'notes', title: 'Backups', body: 'Nightly backups go to cold storage.', updated_at_ms: 2 },
  ]);
  // Written once the changes stop.
  await waitEvent(page, 'a', 'index_saved');
  await page.evaluate(() => window.tabs.a.close());

  async function search(name, query) {
    const started = await tabCall(page, name, 'startSession', 3600);
    await serve(page, name);
    await claimerSeen(page, name, started);
    mcp ??= await pairedClient(started.pairingCode);
    const found = await mcp.call('search_workspace', { query });
    assert.equal(found.isError, false, found.text);
    await tabCall(page, name, 'endSession');
    assert.equal(await served(page, name, AT_ONCE_MS), 'session_ended');
    return found.text;
  }

  const { restored: reloaded } = await openTab(page, 'b', 'snapshot', ownerToken);
  assert.deepEqual(reloaded.index, { from: 'snapshot', reason: null, message: null });
  assert.deepEqual(reloaded.problems, []);
  assert.ok((await search('b', 'cold storage')).includes('Backups'));
  await page.evaluate(() => window.tabs.b.close());

  await damageIndexSnapshot(page, 'snapshot');
  const { restored: damaged } = await openTab(page, 'c', 'snapshot', ownerToken);
  assert.equal(damaged.index.from, 'documents');
  assert.equal(damaged.index.reason, 'damaged');
  assert.ok(damaged.problems.some((p) => p.includes('search index is damaged') && p.includes('nothing is lost')), JSON.stringify(damaged.problems));
  assert.deepEqual(damaged.documents.map((d) => d.id).sort(), ['d_backup', 'd_rotation']);
  assert.ok((await search('c', 'rotation')).includes('Key rotation'), 'search works from the documents');
  await waitEvent(page, 'c', 'index_saved');
  await page.evaluate(() => window.tabs.c.close());

  // Documents changed after the snapshot was written: it is out of date, and the new text is
  // what is searched.
  await rewriteDocument(page, 'snapshot', 'd_backup', 'Weekly backups go to the vault.');
  const { restored: stale } = await openTab(page, 'd', 'snapshot', ownerToken);
  assert.equal(stale.index.from, 'documents');
  assert.equal(stale.index.reason, 'stale');
  assert.deepEqual(stale.problems, [], 'an out-of-date snapshot is no problem for the person');
  const vault = await search('d', 'vault');
  assert.ok(vault.includes('Backups'), vault);
  await waitEvent(page, 'd', 'index_saved');
  await page.evaluate(() => window.tabs.d.close());

  const { restored: again } = await openTab(page, 'e', 'snapshot', ownerToken);
  assert.equal(again.index.from, 'snapshot', 'the fresh snapshot is used at the next start');
  assert.deepEqual(page.cspViolations, []);
  assert.deepEqual(page.consoleErrors, []);
});

// In both browsers. Firefox reports the refused WebSocket as a script error of the page's
// (which its driver calls a page error) where Chromium logs it: the page's own `error` and
// `unhandledrejection` listeners hear nothing either way, the Worker does not fail, and the
// loop serves over HTTP.
for (const kind of ['chromium', 'firefox']) test(`a relay that offers no channel is served over HTTP alone, in ${kind}`, async () => {
  const plain = await startRelay({ web: webWithHostFixture(), args: ['--max-channels-per-owner', '0'] });
  const other = kind === 'firefox' ? await launchBrowser({ browser: 'firefox' }) : null;
  try {
    const page = await openPage(other ? await other.newContext() : context, `${plain.base}/host/index.html`);
    page.on('pageerror', (error) => page.consoleErrors.push(`uncaught: ${error.message}`));
    await page.waitForSelector('html[data-ready="yes"]');
    await page.evaluate(() => {
      window.heard = [];
      addEventListener('error', (event) => window.heard.push(`error: ${event.message}`));
      addEventListener('unhandledrejection', (event) => window.heard.push(`unhandled: ${event.reason}`));
    });
    const ownerToken = await plain.ownerToken();
    await page.evaluate(async ({ ownerToken }) => {
      window.tabs ??= {};
      window.tabs.plain = await window.openTab({ ownerToken, workspace: 'plain' });
    }, { ownerToken });
    await grantEverything(page, 'plain');
    const started = await tabCall(page, 'plain', 'startSession', 3600);
    await serve(page, 'plain');
    const mcp = await pairedClient(started.pairingCode);
    const found = await mcp.call('search_workspace', { query: 'rotation' });
    assert.equal(found.isError, false, found.text);
    assert.deepEqual(await transports(page, 'plain'), ['http']);
    mcp.close();
    await tabCall(page, 'plain', 'endSession');
    assert.equal(await served(page, 'plain', AT_ONCE_MS), 'session_ended');
    assert.deepEqual(page.cspViolations, []);
    assert.deepEqual(await page.evaluate(() => window.heard), [], 'the page hears no error');
    const browsersOwn = /^uncaught: Firefox can.t establish a connection to the server at ws:\/\/[^ ]+\/v1\/channel\.$/;
    assert.deepEqual(page.consoleErrors.filter((error) => error.startsWith('uncaught') && !(kind === 'firefox' && browsersOwn.test(error))), [], 'nothing uncaught but Firefox\'s own report of the refusal');
    assert.deepEqual(await page.evaluate(() => window.tabs.plain.warnings.filter((w) => /worker failed/.test(w.message))), [], 'the Worker did not fail');
  } finally {
    await other?.close();
    await plain.stop();
  }
});

test('after close() every method rejects at once with code closed, a call waiting then too', async () => {
  const page = await hostPage();
  await openTab(page, 'shut', 'closed');
  const outcome = await page.evaluate(async () => {
    const tab = window.tabs.shut;
    // Settles or not: a call that never settles is reported as such, not waited for.
    const settled = (promise) => Promise.race([
      promise.then(() => 'resolved', (error) => `${error.name} ${error.code}`),
      new Promise((ok) => setTimeout(() => ok('never settled'), 5000)),
    ]);
    const waiting = tab.serve();
    tab.close();
    const after = {};
    const calls = {
      registerTool: () => tab.registerTool({ name: 'late', description: 'Late.', inputSchema: { type: 'object' }, kind: 'read' }, () => 'x'),
      addSource: () => tab.addSource('late'), putDocuments: () => tab.putDocuments([]), removeDocument: () => tab.removeDocument('d_x'),
      saveIndex: () => tab.saveIndex(), document: () => tab.document('d_x'), documents: () => tab.documents(), sources: () => tab.sources(),
      setGrants: () => tab.setGrants({ access: 'off', sources: [], tools: [] }), grants: () => tab.grants(), allTools: () => tab.allTools(),
      pairing: () => tab.pairing(), newPairing: () => tab.newPairing(), unpair: () => tab.unpair(), startSession: () => tab.startSession(60),
      resume: () => tab.resume(Date.now() + 60_000), session: () => tab.session(), servedElsewhere: () => tab.servedElsewhere(),
      liveStatus: () => tab.liveStatus(), endSession: () => tab.endSession(), serve: () => tab.serve(), stop: () => tab.stop('signed_out'),
      lock: () => tab.lock(), pendingProposals: () => tab.pendingProposals(), applyProposal: () => tab.applyProposal('p'),
      rejectProposal: () => tab.rejectProposal('p'), auditLog: () => tab.auditLog(), setPassphrase: () => tab.setPassphrase(null),
      unlock: () => tab.unlock('x'), setOwnerToken: () => tab.setOwnerToken('t'),
    };
    for (const [name, call] of Object.entries(calls)) after[name] = await settled(call());
    return { waiting: await settled(waiting), after };
  });
  assert.equal(outcome.waiting, 'SealpostError closed', 'the call waiting at close');
  for (const [name, settled] of Object.entries(outcome.after)) assert.equal(settled, 'SealpostError closed', name);
});

test('registering a tool tells a grant picker at once (tools_changed), with no polling', async () => {
  const page = await hostPage();
  await openTab(page, 'picker', 'picker');
  const seen = await page.evaluate(async () => {
    const tab = window.tabs.picker;
    const changed = new Promise((ok) => tab.on('tools_changed', () => ok('changed')));
    await tab.registerTool({ name: 'word_count', description: 'Counts words.', inputSchema: { type: 'object' }, kind: 'read' }, () => '1');
    return await Promise.race([changed, new Promise((ok) => setTimeout(() => ok('never said'), 5000))]);
  });
  assert.equal(seen, 'changed');
});

test('a tool granted during a live session reaches the paired plugin at once, and a call in flight still answers', async () => {
  const page = await hostPage();
  await openTab(page, 'g', 'catalog');
  await page.evaluate(async () => {
    const tab = window.tabs.g;
    await tab.registerTool({ name: 'host_slow', description: 'Answers after a moment.', inputSchema: { type: 'object' }, kind: 'read' },
      () => new Promise((resolve) => setTimeout(() => resolve('slow answer'), 1500)));
    await tab.registerTool({ name: 'host_late', description: 'Granted later.', inputSchema: { type: 'object' }, kind: 'read' },
      () => 'late answer');
    await tab.setGrants({ access: 'on', sources: [], tools: ['host_slow'] });
  });
  const started = await tabCall(page, 'g', 'startSession', 3600);
  const mcp = await pairedClient(started.pairingCode);
  await serve(page, 'g');
  // `ready`: the relay has seen the tab, so a call made at once is served, not refused.
  await waitEvent(page, 'g', 'ready', AT_ONCE_MS);
  const listed = async () => (await mcp.request('tools/list')).result.tools.map((t) => t.name);
  assert.ok(!(await listed()).includes('host_late'), 'not granted, not listed');

  const inFlight = mcp.call('host_slow');
  await tabCall(page, 'g', 'setGrants', { access: 'on', sources: [], tools: ['host_slow', 'host_late'] });
  // The plugin answers tools/list from its cache and refreshes it behind: ask until it shows.
  let names = [];
  for (let attempt = 0; attempt < 50 && !names.includes('host_late'); attempt += 1) {
    names = await listed();
    if (!names.includes('host_late')) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.ok(names.includes('host_late'), `the newly granted tool is listed: ${names}`);
  assert.ok(mcp.notifications.some((n) => n.method === 'notifications/tools/list_changed'), 'the client was told the list changed');
  const slow = await inFlight;
  assert.equal(slow.isError, false, slow.text);
  assert.ok(slow.text.includes('slow answer'), 'the call in flight was not cancelled by the change');
  const late = await mcp.call('host_late');
  assert.equal(late.isError, false, late.text);
  assert.ok(late.text.includes('late answer'), late.text);
  assert.equal((await tabCall(page, 'g', 'session')).sessionId, started.sessionId, 'the same session throughout');

  // Taken back: the list follows, again without a new session.
  await tabCall(page, 'g', 'setGrants', { access: 'on', sources: [], tools: ['host_slow'] });
  for (let attempt = 0; attempt < 50 && names.includes('host_late'); attempt += 1) {
    names = await listed();
    if (names.includes('host_late')) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.ok(!names.includes('host_late'), `the tool taken back is no longer listed: ${names}`);
  mcp.close();
  assert.deepEqual(page.cspViolations, []);
  assert.deepEqual(page.consoleErrors, []);
});
