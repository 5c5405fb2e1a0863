// `cargo xtask bench browser`: the browser module in headless Chromium, on a page the relay
// serves (browser.html), over the executor benchmark's 10,000-document corpus and its 200
// queries. Reports search query p50/p99 and index build time beside MiniSearch on the same
// corpus and queries in the same run (as ratios), the executor's claimed-envelope to
// reply-envelope time for a no-op tool, and the tab's JS heap plus wasm memory after indexing
// against the corpus's size. xtask assembles the served folder (SEALPOST_WEB_DIR) and passes
// a release relay (SEALPOST_RELAY_BIN).

import { startRelay, launchBrowser } from '../tests/harness.mjs';
import { percentile, ms, mb, ratio, against } from './stats.mjs';

const CALL_SAMPLES = 200;
const CALL_BATCH = 10;

const relay = await startRelay();
const browser = await launchBrowser();
try {
  const page = await browser.newPage();
  page.on('pageerror', (error) => console.error('page error:', error.message));
  await page.goto(`${relay.base}/bench/browser.html`);
  await page.waitForFunction(() => window.bench !== undefined);
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');

  // The JS heap after a full collection: V8's used size, and the page's metric of it.
  async function heap() {
    await cdp.send('HeapProfiler.collectGarbage');
    const usage = await cdp.send('Runtime.getHeapUsage');
    const { metrics } = await cdp.send('Performance.getMetrics');
    const metric = (name) => metrics.find((m) => m.name === name)?.value ?? NaN;
    return { used: usage.usedSize, metricUsed: metric('JSHeapUsedSize'), wasm: await page.evaluate(() => window.bench.wasmMemoryBytes()) };
  }

  const corpus = await page.evaluate(() => window.bench.load());
  const resolution = await page.evaluate(() => window.bench.clockResolutionMs());
  console.log(`corpus: ${corpus.documents} documents, ${mb(corpus.textBytes)} of text (titles and bodies, UTF-8), ${corpus.queries} queries; page clock resolution ${ms(resolution)}`);
  const before = await heap();

  const wasmBuild = await page.evaluate(() => window.bench.buildWasm());
  const indexed = await heap();
  const tab = indexed.used + indexed.wasm;
  const miniBuild = await page.evaluate(() => window.bench.buildMini());
  const both = await heap();

  const { times, matched } = await page.evaluate(() => window.bench.queries());
  const calls = await page.evaluate(([s, b]) => window.bench.calls(s, b), [CALL_SAMPLES, CALL_BATCH]);

  const p = (name, q) => percentile(times[name], q);
  console.log(`\nindex build, corpus JSON text to ready: wasm ${ms(wasmBuild.ms)}, MiniSearch ${ms(miniBuild.ms)} (wasm/MiniSearch ${ratio(wasmBuild.ms, miniBuild.ms)}; ${against(wasmBuild.ms <= miniBuild.ms, '≤ 1.00×')})`);
  console.log(`query, index alone (wasm Workspace::search, best 10): p50 ${ms(p('wasmIndex', 0.5))}, p99 ${ms(p('wasmIndex', 0.99))}; ${matched.wasmIndex}/${corpus.queries} matched`);
  console.log(`query, search_workspace tool (schema, grants, search, snippets, JSON): p50 ${ms(p('wasmTool', 0.5))}, p99 ${ms(p('wasmTool', 0.99))}`);
  console.log(`query, MiniSearch search (sorted, best 10 taken): p50 ${ms(p('minisearch', 0.5))}, p99 ${ms(p('minisearch', 0.99))}; ${matched.minisearch}/${corpus.queries} matched`);
  const speedup = p('minisearch', 0.5) / p('wasmTool', 0.5);
  console.log(`  MiniSearch/wasm tool: p50 ${ratio(p('minisearch', 0.5), p('wasmTool', 0.5))}, p99 ${ratio(p('minisearch', 0.99), p('wasmTool', 0.99))} (${against(speedup >= 2, 'p50 ≥ 2×')})`);
  console.log(`  MiniSearch/wasm index: p50 ${ratio(p('minisearch', 0.5), p('wasmIndex', 0.5))}, p99 ${ratio(p('minisearch', 0.99), p('wasmIndex', 0.99))}`);

  const c50 = percentile(calls.times, 0.5);
  console.log(`\nclaimed envelope to reply envelope, no-op read tool (open, checks, tool, seal, audit; ${CALL_SAMPLES} batches of ${CALL_BATCH} calls, mean per call): p50 ${ms(c50)}, p99 ${ms(percentile(calls.times, 0.99))} (${against(c50 <= 2, 'p50 ≤ 2 ms')})`);

  console.log(`\nmemory after a full collection, module loaded, before indexing: JS heap ${mb(before.used)}, wasm ${mb(before.wasm)}`);
  console.log(`after indexing (corpus text dropped): JS heap ${mb(indexed.used)} (Performance JSHeapUsedSize ${mb(indexed.metricUsed)}), wasm memory ${mb(indexed.wasm)}; heap + wasm ${mb(tab)} = ${ratio(tab, corpus.textBytes)} the corpus's text (${against(tab <= 3 * corpus.textBytes, '≤ 3×')})`);
  console.log(`MiniSearch's index on top (same collection): JS heap +${mb(both.used - indexed.used)} = ${ratio(both.used - indexed.used, corpus.textBytes)} the corpus's text`);
} finally {
  await browser.close();
  await relay.stop();
}
