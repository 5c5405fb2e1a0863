// Where Sealpost's time goes in `cargo xtask bench web`, leg by leg, from what each part records
// itself: the plugin's `sealpost::timing` log line per call (crates/plugin/src/call.rs), the
// tab's performance marks in its Worker (crates/browser/src/timing.rs, benchmark builds only)
// and the relay's own request timings on /metrics. Figures are means per call: the Worker's
// clock is coarsened to 100 µs (the app is not cross-origin isolated), and a mean of coarsened
// readings stays close where a median would round.

import { ms } from './stats.mjs';

// The plugin's timing lines, as `onLog` for the McpClient that drives it.
export function pluginTimings() {
  const calls = [];
  const onLog = (line) => {
    if (!line.includes('sealpost::timing')) return;
    const fields = Object.fromEntries([...line.matchAll(/(\w+)=("?)([^\s"]*)\2/g)].map(([, k, , v]) => [k, v]));
    calls.push({ tool: fields.tool, ...Object.fromEntries(Object.entries(fields).filter(([k]) => k.endsWith('_us')).map(([k, v]) => [k.slice(0, -3), Number(v) / 1000])) });
  };
  return { calls, onLog, clear: () => { calls.length = 0; } };
}

// The tab's Worker (where the claim loop runs), from the page.
function tabWorker(page) {
  const worker = page.workers().find((w) => w.url().includes('worker.js'));
  if (!worker) throw new Error('the tab has no Worker');
  return worker;
}

export async function clearTabMarks(page) {
  await tabWorker(page).evaluate(() => performance.clearMarks());
}

// The tab's calls since the marks were cleared, each as its stages' times (ms since received).
export async function tabCalls(page) {
  const marks = await tabWorker(page).evaluate(() => performance.getEntriesByType('mark')
    .filter((m) => m.name.startsWith('sealpost:')).map((m) => [m.name.slice('sealpost:'.length), m.startTime]));
  const calls = [];
  for (const [name, at] of marks) {
    if (name === 'received') calls.push({ received: at });
    else if (calls.length) calls[calls.length - 1][name] = at;
  }
  return calls;
}

// The relay's request timings: total seconds and count by method and route.
export async function relayTimings(metricsUrl) {
  const text = await (await fetch(metricsUrl)).text();
  const totals = {};
  for (const line of text.split('\n')) {
    const counter = line.match(/^(sealpost_calls_posted_total|sealpost_claims_handed_total) (\S+)$/);
    if (counter) totals[counter[1]] = Number(counter[2]);
    const m = line.match(/^(sealpost_http_request_duration_seconds|sealpost_claim_latency_seconds)_(sum|count)(?:\{(.*)\})? (\S+)$/);
    if (!m) continue;
    const labels = Object.fromEntries([...(m[3] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map(([, k, v]) => [k, v]));
    const key = m[1] === 'sealpost_claim_latency_seconds' ? 'post to claim' : `${labels.method} ${labels.route}`;
    totals[key] ??= { sum: 0, count: 0 };
    totals[key][m[2]] += Number(m[4]);
  }
  return totals;
}

const mean = (values) => (values.length ? values.reduce((a, b) => a + b, 0) / values.length : NaN);

// Prints the table: the plugin's and the tab's legs per tool, the relay's per request (its
// requests carry no tool, so both tools' requests are pooled).
export function printLegs({ client, plugin, tab, relayBefore, relayAfter }) {
  const tools = Object.keys(client);
  const row = (name, values) => console.log(`  ${name.padEnd(58)} ${values.map((v) => (Number.isNaN(v) ? '—' : ms(v)).padStart(9)).join(' ')}`);
  const pluginLeg = (tool, leg) => mean(plugin.filter((c) => c.tool === tool).map((c) => c[leg]));
  const stage = (calls, from, to) => mean(calls.filter((c) => c[from] !== undefined && c[to] !== undefined).map((c) => c[to] - c[from]));
  console.log(`where Sealpost's time goes, mean per call (${tools.join(' / ')}):`);
  row('the client\'s whole call', tools.map((t) => mean(client[t])));
  row('MCP over stdio, both ways (client less the plugin\'s call)', tools.map((t) => mean(client[t]) - pluginLeg(t, 'total')));
  row('plugin: session look-up', tools.map((t) => pluginLeg(t, 'look_up')));
  row('plugin: seal', tools.map((t) => pluginLeg(t, 'seal')));
  // The post waits for the reply and answers with it; a read follows only when it did not.
  const relayAndTab = (t) => pluginLeg(t, 'post') + pluginLeg(t, 'wait');
  row('plugin: post, to the relay\'s answer with the reply', tools.map((t) => pluginLeg(t, 'post')));
  row('plugin: reads after the post, to the answer', tools.map((t) => pluginLeg(t, 'wait')));
  const stages = [['received', 'opened', 'open the envelope'], ['opened', 'granted', 'schema and grants'], ['granted', 'ran', 'run the tool'],
    ['ran', 'sealed', 'seal the reply']];
  for (const [from, to, what] of stages) row(`  tab: ${what}`, tools.map((t) => stage(tab[t], from, to)));
  // The plugin's post is answered once the relay has stored the reply, while the relay's
  // acknowledgement is on its way back to the tab: the last leg overlaps the tab's.
  row('  the rest: the call to the relay and the tab, the reply back', tools.map((t) => relayAndTab(t) - stage(tab[t], 'received', 'sealed')));
  row('  (tab: reply sent, to the relay\'s acknowledgement)', tools.map((t) => stage(tab[t], 'sealed', 'acknowledged')));
  row('plugin: open and fence the reply', tools.map((t) => pluginLeg(t, 'open')));
  const counted = (name) => (relayAfter[name] ?? 0) - (relayBefore[name] ?? 0);
  console.log(`  posts that claimed for the tab's waiting claim in their own write: ${counted('sealpost_claims_handed_total')} of ${counted('sealpost_calls_posted_total')}`);
  console.log('  the relay\'s own time per request, both tools pooled:');
  for (const [key, after] of Object.entries(relayAfter)) {
    if (typeof after === 'number') continue;
    const before = relayBefore[key] ?? { sum: 0, count: 0 };
    const count = after.count - before.count;
    if (count > 0) console.log(`    ${key.padEnd(56)} ${ms(((after.sum - before.sum) * 1000) / count).padStart(9)} × ${count}`);
  }
}
