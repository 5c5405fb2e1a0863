// The page side of `cargo xtask bench browser`: the phases web/bench/browser.mjs calls, in a
// tab on the relay, with the browser module loaded on the page (no Worker) beside MiniSearch.
// The driver takes heap readings between phases over CDP; each phase answers its own figures.

import init, { BenchWorkspace, BenchCalls, wasmMemoryBytes } from '../sealpost/pkg/sealpost_browser.js';
import MiniSearch from './minisearch.js';

const state = { corpusText: null, queries: null, wasm: null, mini: null };

// Times `run` over repeats until at least `floorMs` has passed: per-run milliseconds. The
// page's clock is coarsened (100 µs, jittered, without cross-origin isolation), so one
// sub-millisecond run cannot be timed alone.
function timed(run, floorMs = 1) {
  let runs = 0;
  const started = performance.now();
  let elapsed = 0;
  do {
    run();
    runs += 1;
    elapsed = performance.now() - started;
  } while (elapsed < floorMs);
  return elapsed / runs;
}

function clockResolutionMs() {
  let smallest = Infinity;
  for (let i = 0; i < 200; i += 1) {
    const a = performance.now();
    let b = a;
    while (b === a) b = performance.now();
    smallest = Math.min(smallest, b - a);
  }
  return smallest;
}

async function loadCorpus() {
  state.corpusText = await (await fetch('corpus.json')).text();
}

// MiniSearch has no phrase or explicit prefix syntax: a quoted phrase becomes all of its words
// (AND, order unchecked), `word*` a prefix search, and several words any of them (OR), as
// `search_workspace` ranks them.
function miniQuery(query) {
  if (query.startsWith('"')) return [query.replaceAll('"', ''), { combineWith: 'AND' }];
  if (query.endsWith('*')) return [query.slice(0, -1), { prefix: true }];
  return [query, {}];
}

window.bench = {
  clockResolutionMs,

  async load() {
    await init();
    const response = await fetch('corpus.json');
    const corpus = await response.json();
    state.queries = corpus.queries;
    const textBytes = corpus.documents.reduce((n, d) => n + new TextEncoder().encode(d.title + d.body).length, 0);
    return { documents: corpus.documents.length, queries: corpus.queries.length, textBytes, wasmBytes: wasmMemoryBytes() };
  },

  loadCorpus,

  // From the corpus JSON text to a ready index, then the text is dropped: what stays is the
  // module's memory.
  async buildWasm() {
    await loadCorpus();
    const started = performance.now();
    state.wasm = new BenchWorkspace(state.corpusText);
    const ms = performance.now() - started;
    state.corpusText = null;
    return { ms, documents: state.wasm.documents(), wasmBytes: wasmMemoryBytes() };
  },

  // The same for MiniSearch: JSON.parse, then addAll (title and body indexed, nothing stored).
  async buildMini() {
    await loadCorpus();
    const started = performance.now();
    const documents = JSON.parse(state.corpusText).documents;
    state.mini = new MiniSearch({ fields: ['title', 'body'], idField: 'id' });
    state.mini.addAll(documents);
    const ms = performance.now() - started;
    state.corpusText = null;
    return { ms, documents: state.mini.documentCount };
  },

  // Each query once through every engine (warming the JIT and caches alike), then each query
  // timed through every engine in turn, so drift in the machine's load hits all three alike.
  queries() {
    const engines = {
      wasmIndex: (q) => state.wasm.search(q, 10),
      wasmTool: (q) => state.wasm.searchTool(q),
      minisearch: (q) => state.mini.search(...miniQuery(q)).slice(0, 10).length,
    };
    const matched = {};
    for (const [name, run] of Object.entries(engines)) {
      matched[name] = state.queries.filter((q) => run(q) > 0).length;
    }
    const times = Object.fromEntries(Object.keys(engines).map((name) => [name, []]));
    for (const query of state.queries) {
      for (const [name, run] of Object.entries(engines)) times[name].push(timed(() => run(query)));
    }
    return { times, matched };
  },

  // Sealed no-op calls through the executor: batches of `batch` distinct calls, mean per call.
  calls(samples, batch) {
    const calls = new BenchCalls((samples + 10) * batch);
    let n = 0;
    for (let i = 0; i < 10 * batch; i += 1) calls.handle(n++);
    const times = [];
    for (let s = 0; s < samples; s += 1) {
      const started = performance.now();
      for (let i = 0; i < batch; i += 1) calls.handle(n++);
      times.push((performance.now() - started) / batch);
    }
    calls.free();
    return { times, wasmBytes: wasmMemoryBytes() };
  },

  wasmMemoryBytes,
};

document.getElementById('status').textContent = 'ready';
