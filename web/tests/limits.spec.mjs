// No answer lost to a limit: two `sealpost` processes on one pairing (two MCP clients on one
// computer) fire calls together at the real tab through the real relay, at the relay's default
// rates and with the account's rate lowered. Every call is answered, or refused at once in words
// about the rate; none reaches the agent as a timeout; and the tab's Activity says "answered"
// exactly for the answers the relay accepted.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  startRelay, launchBrowser, openPage, tempDir, pairPlugin, McpClient, webWithHostFixture,
} from './harness.mjs';

// A call the plugin gives up on waits this long first; a timeout would show as its sentence.
const CALL_TIMEOUT_S = '20';

let browser;

before(async () => {
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
});

// A relay (with `args`), a tab serving a granted workspace from the host fixture, and two
// plugin processes paired with its code.
async function servedTwice(args) {
  const relay = await startRelay({ web: webWithHostFixture(), args });
  const context = await browser.newContext();
  const page = await openPage(context, `${relay.base}/host/index.html`);
  page.on('pageerror', (error) => page.consoleErrors.push(error.message));
  await page.waitForSelector('html[data-ready="yes"]');
  const ownerToken = await relay.ownerToken();
  const code = await page.evaluate(async (ownerToken) => {
    const tab = await window.openTab({ ownerToken, workspace: 'limits' });
    window.tab = tab;
    await tab.addSource('notes');
    await tab.putDocuments([
      { id: 'd_rotation', source: 'notes', title: 'Key rotation', body: 'Rotate the signing keys every ninety days.', updated_at_ms: 1 },
    ]);
    const tools = (await tab.allTools()).map((t) => t.name);
    await tab.setGrants({ access: 'on', sources: ['notes'], tools });
    const started = await tab.startSession(3600);
    tab.serve();
    return started.pairingCode;
  }, ownerToken);
  const config = tempDir('sealpost-limits-plugin-');
  const paired = await pairPlugin(config, code);
  assert.equal(paired.status, 0, paired.output);
  const clients = [];
  for (let i = 0; i < 2; i += 1) {
    const mcp = new McpClient(config, { env: { SEALPOST_CALL_TIMEOUT_S: CALL_TIMEOUT_S } });
    await mcp.initialize();
    clients.push(mcp);
  }
  return {
    relay,
    page,
    clients,
    async close() {
      for (const mcp of clients) mcp.close();
      await context.close();
      await relay.stop();
    },
  };
}

// `perClient` searches from each client at once; resolves to every result.
function fire(clients, perClient) {
  return Promise.all(clients.flatMap((mcp) => Array.from({ length: perClient }, () => mcp.call('search_workspace', { query: 'rotation' }))));
}

async function check(served, results) {
  const timedOut = results.filter((r) => /did not answer within|expired before/.test(r.text));
  assert.deepEqual(timedOut.map((r) => r.text), [], 'no call reaches the agent as a timeout');
  const other = results.filter((r) => r.isError && !/making calls faster than the relay/.test(r.text));
  assert.deepEqual(other.map((r) => r.text), [], 'a call is answered or refused for the rate');
  const answered = results.filter((r) => !r.isError);
  for (const r of answered) assert.ok(r.text.includes('Key rotation'), r.text);

  // Activity: every call the tab ran is recorded once its answer's fate is known.
  const ran = await served.page.waitForFunction((n) => {
    const calls = window.tab.events.filter((e) => e.type === 'audit' && e.record.call_id);
    return calls.length >= n && calls;
  }, answered.length, { timeout: 30_000 }).then((handle) => handle.jsonValue());
  const accepted = ran.filter((e) => e.record.delivery?.type === 'accepted' && e.record.outcome.type === 'answered');
  const lost = ran.filter((e) => e.record.delivery?.type !== 'accepted');
  assert.deepEqual(lost.map((e) => e.record), [], 'every answer the tab made was accepted by the relay');
  assert.equal(accepted.length, answered.length, 'Activity says answered exactly for what reached the agent');
  assert.deepEqual(served.page.consoleErrors, []);
  return { answered: answered.length, refused: results.length - answered.length };
}

test('two clients on one pairing, at the default rates: a call is answered or refused at once for the rate, never lost', async () => {
  const served = await servedTwice([]);
  try {
    const results = await fire(served.clients, 60);
    const { answered, refused } = await check(served, results);
    assert.ok(answered > 0, 'calls get through');
    console.log(`default rates: ${answered} answered, ${refused} refused for the rate`);
  } finally {
    await served.close();
  }
});

test('with the account\'s rate lowered, a call is answered or refused at once for the rate, never lost', async () => {
  const served = await servedTwice(['--rate-per-owner-per-s', '20', '--rate-burst-per-owner', '40']);
  try {
    const results = await fire(served.clients, 30);
    const { answered, refused } = await check(served, results);
    assert.equal(answered + refused, 60);
    assert.ok(answered > 0, 'some calls get through');
    console.log(`lowered rate: ${answered} answered, ${refused} refused for the rate`);
  } finally {
    await served.close();
  }
});
