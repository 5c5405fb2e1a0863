// `cargo xtask bench web`: the whole loop on loopback. An MCP client (this script) → the real
// `sealpost` plugin over stdio → the relay (SQLite, release) → the web app's tab in headless
// Chromium → back. 200 `search_workspace` calls, each beside four bare HTTP round trips to the
// same relay (GET /healthz) in the same run, printed as a ratio; then the same with the tab
// hidden behind another page, and with its window minimised; then, on a relay that offers no
// session channel (so the tab uses `fetch`), the tab in front again, as a same-run baseline.
// Also a tool the page registers through WebMCP beside the built-in `list_sources`, and the
// whole loop against the plaintext peer people use today (peer.mjs), the same client driving
// both, calls interleaved, with where Sealpost's time goes leg by leg (legs.mjs).
// SEALPOST_BENCH_WEB_ONLY=peer runs the comparison with the peer and the loop on PostgreSQL against
// SQLite; SEALPOST_BENCH_WEB_ONLY=postgres runs only the latter.
//
// The app is driven as a person drives it (web/tests/product.spec.mjs): sign in from the
// printed link, import documents from a folder, grant, start a session, pair the plugin with
// the code the page shows. The documents and queries are the executor benchmark's (the first
// SEALPOST_BENCH_WEB_DOCS documents, 1,000 unless set), from SEALPOST_BENCH_CORPUS.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { grantAllAndServe, startRelay, launchBrowser, openPage, writeFolder, tempDir, pairPlugin, McpClient } from '../tests/harness.mjs';
import { percentile, ms, ratio, against } from './stats.mjs';
import { startPeer } from './peer.mjs';
import { pluginTimings, clearTabMarks, tabCalls, relayTimings, printLegs } from './legs.mjs';

const CALLS = 200;
const WARMUP = 20;
const ECHOES = 4;
const DOCS = Number(process.env.SEALPOST_BENCH_WEB_DOCS ?? 1000);
const corpus = JSON.parse(readFileSync(process.env.SEALPOST_BENCH_CORPUS, 'utf8'));
const documents = corpus.documents.slice(0, DOCS);

// The loop costs the owner about five requests per call (the plugin's lookup, post and read;
// the tab's claim and reply): at this pace that is past the default per-owner and per-token
// rates, so the bench lifts them to measure the loop, not the limiter.
const UNLIMITED = ['--rate-per-owner-per-s', '0', '--rate-per-token-per-s', '0'];
let failedRuns = 0;
const browser = await launchBrowser();

// One relay, one tab, one paired plugin; `measureAll` gets what to run with them.
// `database`: the relay's database URL (a fresh SQLite file when not given).
async function withLoop(relayArgs, measureAll, { database } = {}) {
  const relay = await startRelay({ args: [...UNLIMITED, '--metrics-listen', '127.0.0.1:0', ...relayArgs], log: process.env.SEALPOST_BENCH_RELAY_LOG ?? 'warn', database });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  let mcp;
  try {
    const page = await openPage(context, relay.signinUrl ?? await relay.newSigninUrl());
    page.on('pageerror', (error) => console.error('page error:', error.message));
    await page.waitForSelector('#nav:not([hidden])');
    await page.waitForSelector('main h2:not(:text-is("Sign in"))');

    const files = Object.fromEntries(documents.map((d) => [`bench/${d.id}.md`, `# ${d.title}\n\n${d.body}\n`]));
    const folder = writeFolder(files);
    const importStarted = performance.now();
    await page.fill('#source-name', 'bench');
    await page.setInputFiles('#pick-folder', join(folder, 'bench'));
    await page.waitForSelector(`#import-status:text("Imported ${documents.length} files into bench.")`, { timeout: 600_000 });
    const importMs = performance.now() - importStarted;

    const code = await grantAllAndServe(page, 'bench');
    const config = tempDir('sealpost-bench-plugin-');
    const pairedResult = await pairPlugin(config, code);
    if (pairedResult.status !== 0) throw new Error(`sealpost pair failed: ${pairedResult.output}`);
    const timings = pluginTimings();
    mcp = new McpClient(config, { env: { SEALPOST_LOG: 'warn,sealpost::timing=debug' }, onLog: timings.onLog });
    await mcp.initialize();
    console.log(`${documents.length} documents imported through the app in ${ms(importMs)}; ${CALLS} calls after ${WARMUP} warm-up calls, queries from the executor benchmark`);
    await measureAll({ relay, context, page, mcp, timings });
  } finally {
    mcp?.close();
    await context.close();
    await relay.stop();
  }
}

// Each call, then four echoes: interleaved, so the machine's load hits both alike.
async function measure({ relay, mcp }) {
  const healthz = `${relay.base}/healthz`;
  const echoes = async () => {
    const started = performance.now();
    for (let i = 0; i < ECHOES; i += 1) await (await fetch(healthz)).text();
    return performance.now() - started;
  };
  const calls = [];
  const echo = [];
  let failed = 0;
  let firstError = null;
  for (let i = 0; i < WARMUP; i += 1) {
    await mcp.call('search_workspace', { query: corpus.queries[i % corpus.queries.length] });
    await echoes();
  }
  for (let i = 0; i < CALLS; i += 1) {
    const query = corpus.queries[i % corpus.queries.length];
    const started = performance.now();
    const answer = await mcp.call('search_workspace', { query });
    calls.push(performance.now() - started);
    if (answer.isError) {
      failed += 1;
      firstError ??= answer.text;
    }
    echo.push(await echoes());
  }
  return { calls, echo, failed, firstError };
}

// Times calls into lists (none while warming up). A call answered with an error comes back
// fast, so it is counted, the first kept, and a run with any is not a measurement.
function callTimer() {
  const timer = { failed: 0, firstError: null };
  timer.call = async (into, client, name, args) => {
    const started = performance.now();
    const answer = await client.call(name, args);
    into?.push(performance.now() - started);
    if (answer.isError) { timer.failed += 1; timer.firstError ??= answer.text; }
  };
  // Says so and answers true when any call failed.
  timer.notMeasured = (what) => {
    if (!timer.failed) return false;
    failedRuns += 1;
    console.log(`${what}: NOT MEASURED, ${timer.failed} calls answered with an error; the first: ${timer.firstError}`);
    return true;
  };
  return timer;
}

// A tool the page registers through WebMCP (Sealpost's own context on the app's page), granted
// and allowed without asking, beside the built-in `list_sources`: both do next to nothing, so
// the difference is the page tool's path (the Worker asks the page, the page asks the context).
async function measurePageTool({ page, mcp }) {
  await page.evaluate(() => document.modelContext.registerTool({
    name: 'page_echo',
    description: 'Echoes the text.',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
    execute: ({ text }) => text,
  }));
  await page.click('nav a[href="#/workspace"]');
  await page.click('nav a[href="#/access"]');
  await page.check('input[name="grant-tool"][value="page_echo"]');
  await page.click('#save-grants');
  for (let i = 0; i < 100 && !(await mcp.request('tools/list')).result.tools.some((t) => t.name === 'page_echo'); i += 1) {
    await new Promise((ok) => setTimeout(ok, 100));
  }
  const first = mcp.call('page_echo', { text: 'warm' });
  await page.click('[data-sealpost-confirm] button:text-is("Allow without asking (this session)")');
  await first;
  const builtin = [];
  const pageTool = [];
  const timer = callTimer();
  for (let i = 0; i < WARMUP; i += 1) { await mcp.call('list_sources'); await mcp.call('page_echo', { text: 'w' }); }
  for (let i = 0; i < CALLS; i += 1) {
    await timer.call(builtin, mcp, 'list_sources', {});
    await timer.call(pageTool, mcp, 'page_echo', { text: `call ${i}` });
  }
  if (timer.notMeasured('WebMCP tool')) return;
  const [b50, p50] = [percentile(builtin, 0.5), percentile(pageTool, 0.5)];
  console.log(`WebMCP tool (page_echo, allowed without asking): p50 ${ms(p50)}, p99 ${ms(percentile(pageTool, 0.99))}; built-in list_sources p50 ${ms(b50)}, p99 ${ms(percentile(builtin, 0.99))}; ratio ${ratio(p50, b50)} (${against(p50 <= 1.2 * b50, '≤ 1.2× the built-in')})`);
}

// Sealpost against the peer, through the same client, call by call in turn so the machine's
// load hits both alike: a no-op (`list_sources` against the peer's `echo`) and a search (the
// same queries; peer.mjs says how the engines differ), PEER_ROUNDS rounds of PEER_CALLS each.
const PEER_ROUNDS = 4;
const PEER_CALLS = 50;
async function measureAgainstPeer({ page, mcp, relay, timings }, database = 'SQLite') {
  const peer = await startPeer(browser, documents);
  try {
    await page.bringToFront();
    const times = { noop: [], echo: [], search: [], peerSearch: [] };
    const timer = callTimer();
    const turn = async (i, record) => {
      const query = corpus.queries[i % corpus.queries.length];
      await timer.call(record ? times.noop : null, mcp, 'list_sources', {});
      await timer.call(record ? times.echo : null, peer.mcp, 'echo', { text: `call ${i}` });
      await timer.call(record ? times.search : null, mcp, 'search_workspace', { query });
      await timer.call(record ? times.peerSearch : null, peer.mcp, 'search', { query });
    };
    for (let i = 0; i < WARMUP; i += 1) await turn(i, false);
    timings.clear();
    await clearTabMarks(page);
    const relayBefore = await relayTimings(relay.metricsUrl);
    for (let round = 0; round < PEER_ROUNDS; round += 1) {
      for (let i = 0; i < PEER_CALLS; i += 1) await turn(round * PEER_CALLS + i, true);
    }
    if (timer.notMeasured('against the peer')) return null;
    const line = (name, ours, theirs, p50Target) => {
      const [o50, t50, o99, t99] = [percentile(ours, 0.5), percentile(theirs, 0.5), percentile(ours, 0.99), percentile(theirs, 0.99)];
      console.log(`  ${name}: Sealpost p50 ${ms(o50)} p99 ${ms(o99)}; peer p50 ${ms(t50)} p99 ${ms(t99)}; p50 ${ratio(o50, t50)} (${against(o50 <= p50Target * t50, `≤ ${p50Target}×`)}), p99 ${ratio(o99, t99)} (${against(o99 <= 2 * t99, '≤ 2×')})`);
    };
    console.log(`against @mcp-b/webmcp-local-relay, the relay on ${database} (same client, interleaved, ${PEER_ROUNDS} × ${PEER_CALLS} calls of each):`);
    line('no-op (list_sources / echo)', times.noop, times.echo, 1.5);
    line('search (search_workspace / MiniSearch)', times.search, times.peerSearch, 1.2);
    // The tab's calls came in turn, as they were sent: a no-op, then a search.
    const tab = await tabCalls(page);
    const sent = times.noop.length + times.search.length;
    if (tab.length !== sent) console.log(`  (the tab marked ${tab.length} calls where ${sent} were sent: its legs are not split by tool)`);
    printLegs({
      client: { list_sources: times.noop, search_workspace: times.search },
      plugin: timings.calls,
      tab: tab.length === sent
        ? { list_sources: tab.filter((_, i) => i % 2 === 0), search_workspace: tab.filter((_, i) => i % 2 === 1) }
        : { list_sources: [], search_workspace: [] },
      relayBefore,
      relayAfter: await relayTimings(relay.metricsUrl),
    });
    return { noop: percentile(times.noop, 0.5), search: percentile(times.search, 0.5) };
  } finally {
    await peer.close();
  }
}

// A call answered with an error comes back fast: a run with any is not a measurement. The
// app's status says how the tab talked to the relay.
async function report(name, page, { calls, echo, failed, firstError }) {
  if (failed) {
    failedRuns += 1;
    console.log(`${name}: NOT MEASURED, ${failed} of ${calls.length} calls answered with an error; the first: ${firstError}`);
    return percentile(calls, 0.5);
  }
  const visibility = await page.evaluate(() => document.visibilityState);
  const connection = await page.evaluate(() => [...document.querySelectorAll('#access-status tr')]
    .find((tr) => tr.querySelector('th')?.textContent === 'Connection')?.querySelector('td')?.textContent);
  const p50 = percentile(calls, 0.5);
  const echo50 = percentile(echo, 0.5);
  console.log(`${name} (document.visibilityState ${visibility}, connection: ${connection ?? 'unknown'}): search_workspace p50 ${ms(p50)}, p99 ${ms(percentile(calls, 0.99))}, max ${ms(Math.max(...calls))}; ${ECHOES} × GET /healthz p50 ${ms(echo50)}; ratio ${ratio(p50, echo50)} (${against(p50 <= 15, 'p50 ≤ 15 ms')})`);
  return p50;
}

// The loop on PostgreSQL against the loop on SQLite, each its own relay, tab and plugin, the
// calls going to one and the other in turn so the machine's drift falls on both alike
// (SEALPOST_BENCH_POSTGRES_URL: `cargo xtask bench web` starts a throwaway cluster). Twice:
// with each commit waiting for the disk (PostgreSQL's default), and with `synchronous_commit`
// off, SQLite's own durability (`synchronous=NORMAL`: a commit survives the relay's crash, not
// the machine's), which a team may choose (docs/RELAY.md, "Durability on PostgreSQL").
async function postgresAgainstSqlite() {
  const url = process.env.SEALPOST_BENCH_POSTGRES_URL;
  if (!url) { console.log('the loop on PostgreSQL: not measured (SEALPOST_BENCH_POSTGRES_URL is not set)'); return; }
  const asynchronous = `${url}${url.includes('?') ? '&' : '?'}options[synchronous_commit]=off`;
  for (const [mode, database] of [['commits wait for the disk', url], ['synchronous_commit off', asynchronous]]) {
    await withLoop([], (sqlite) => withLoop([], (postgres) => compareBackends(sqlite, postgres, mode), { database }));
  }
}

async function compareBackends(sqlite, postgres, mode) {
  const times = { sqliteNoop: [], postgresNoop: [], sqliteSearch: [], postgresSearch: [] };
  const timer = callTimer();
  const turn = async (i, record) => {
    const query = corpus.queries[i % corpus.queries.length];
    await timer.call(record ? times.sqliteNoop : null, sqlite.mcp, 'list_sources', {});
    await timer.call(record ? times.postgresNoop : null, postgres.mcp, 'list_sources', {});
    await timer.call(record ? times.sqliteSearch : null, sqlite.mcp, 'search_workspace', { query });
    await timer.call(record ? times.postgresSearch : null, postgres.mcp, 'search_workspace', { query });
  };
  for (let i = 0; i < WARMUP; i += 1) await turn(i, false);
  const before = [await relayTimings(postgres.relay.metricsUrl), await relayTimings(sqlite.relay.metricsUrl)];
  for (let i = 0; i < PEER_ROUNDS * PEER_CALLS; i += 1) await turn(i, true);
  const after = [await relayTimings(postgres.relay.metricsUrl), await relayTimings(sqlite.relay.metricsUrl)];
  if (timer.notMeasured(`the loop on PostgreSQL (${mode})`)) return;
  console.log(`the loop on PostgreSQL (${mode}) against the loop on SQLite (interleaved, ${PEER_ROUNDS * PEER_CALLS} calls of each):`);
  for (const [name, pg, lite] of [['no-op', times.postgresNoop, times.sqliteNoop], ['search', times.postgresSearch, times.sqliteSearch]]) {
    const [p50, s50] = [percentile(pg, 0.5), percentile(lite, 0.5)];
    console.log(`  ${name}: PostgreSQL p50 ${ms(p50)} p99 ${ms(percentile(pg, 0.99))}; SQLite p50 ${ms(s50)} p99 ${ms(percentile(lite, 0.99))}; ${ratio(p50, s50)} (${against(p50 <= 1.3 * s50, '≤ 1.3×')})`);
  }
  // Where the difference is: each relay's own time, per request, both tools pooled.
  const own = (key, [b, a]) => (a[key] && a[key].count > (b[key]?.count ?? 0)
    ? ms(((a[key].sum - (b[key]?.sum ?? 0)) * 1000) / (a[key].count - (b[key]?.count ?? 0))) : '—');
  for (const key of ['post to claim', 'WS /v1/channel reply']) {
    console.log(`  the relay's own time, ${key}: PostgreSQL ${own(key, [before[0], after[0]])}, SQLite ${own(key, [before[1], after[1]])}`);
  }
  const handed = ([b, a]) => `${a.sealpost_claims_handed_total - b.sealpost_claims_handed_total} of ${a.sealpost_calls_posted_total - b.sealpost_calls_posted_total}`;
  console.log(`  posts that claimed for the tab's waiting claim: PostgreSQL ${handed([before[0], after[0]])}, SQLite ${handed([before[1], after[1]])}`);
}

try {
  let overChannel;
  const only = process.env.SEALPOST_BENCH_WEB_ONLY;
  if (only === 'peer') {
    await withLoop([], measureAgainstPeer);
  } else if (only === 'postgres') {
    // Below, alone.
  } else await withLoop([], async (loop) => {
    const { context, page, relay } = loop;
    overChannel = await report('tab in front', page, await measure(loop));
    await measurePageTool(loop);
    await measureAgainstPeer(loop);

    const other = await context.newPage();
    await other.goto(`${relay.base}/healthz`);
    await other.bringToFront();
    await report('tab behind another page', page, await measure(loop));
    await other.close();
    await page.bringToFront();

    // Headless windows may not minimise; say so rather than lose the figures above.
    try {
      const cdp = await context.newCDPSession(page);
      const { windowId } = await cdp.send('Browser.getWindowForTarget');
      await cdp.send('Browser.setWindowBounds', { windowId, bounds: { windowState: 'minimized' } });
      await report('window minimised', page, await measure(loop));
      await cdp.send('Browser.setWindowBounds', { windowId, bounds: { windowState: 'normal' } });
    } catch (error) {
      console.log(`window minimised: not measured (${error.message})`);
    }
  });
  await postgresAgainstSqlite();
  // The same loop on a relay that offers no channel: the tab claims and answers over fetch.
  if (overChannel !== undefined) await withLoop(['--max-channels-per-owner', '0'], async (loop) => {
    const overHttp = await report('tab in front, relay without the channel', loop.page, await measure(loop));
    console.log(`the channel: tab in front ${ratio(overChannel, overHttp)} the time of HTTP alone (p50 ${ms(overChannel)} against ${ms(overHttp)})`);
  });
} finally {
  if (failedRuns) process.exitCode = 1;
  await browser.close();
}
