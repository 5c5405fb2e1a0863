// The tab's dedicated Worker: runs TabCore (the wasm module), holds the Web Lock that makes one
// tab serve at a time, and keeps the workspace in IndexedDB. A Worker, not the page, so that a
// hidden tab answers as fast as a visible one: the loop waits on the relay's long-poll, never
// on the page's (throttled) timers.
//
// The page talks to it through sealpost.js: {id, method, args} in, {id, ok, result|error} out,
// and {event} for status events. Host tools run in the page: the worker asks with {tool} and
// the page answers with the toolResult method.

import init, { TabCore } from './pkg/sealpost_browser.js';
import { Store } from './store.js';
import { unansweredCause } from './auth.js';

// How long the index must be left unchanged before its snapshot is written: an import or an
// edit session writes it once, not at every document or keystroke.
const INDEX_SAVE_DELAY_MS = 2000;

const ready = init();
let core = null;
let relay = null;
let store = null;
let serving = null;
let nextToolCall = 1;
const toolCalls = new Map();
const channel = new BroadcastChannel('sealpost-serving');
const tabId = crypto.randomUUID();

function emit(event) {
  self.postMessage({ event });
}

channel.onmessage = (message) => {
  if (message.data?.type === 'serving' && message.data.tabId !== tabId) {
    emit({ type: 'elsewhere', tabId: message.data.tabId });
  }
};

async function persistPairing() {
  const pairing = core.exportPairing();
  if (pairing) await store.putSealed('pairing', pairing);
  else await store.deleteSealed('pairing');
}

// The search index snapshot, written once changes stop for INDEX_SAVE_DELAY_MS; saves run one
// after another, so an older snapshot never lands after a newer one.
let indexTimer = null;
let indexSaving = Promise.resolve();

function indexChanged() {
  clearTimeout(indexTimer);
  indexTimer = setTimeout(() => { saveIndex().catch((e) => emit({ type: 'warning', message: `search index not kept: ${e.message ?? e}` })); }, INDEX_SAVE_DELAY_MS);
}

function saveIndex() {
  clearTimeout(indexTimer);
  indexTimer = null;
  const bytes = core.indexSnapshot();
  indexSaving = indexSaving.catch(() => {}).then(async () => {
    await store.putIndexSnapshot(bytes);
    emit({ type: 'index_saved', bytes: bytes.length });
  });
  return indexSaving;
}

async function persistProposals() {
  await store.putSealed('proposals', JSON.stringify(core.pendingProposals()));
}

const methods = {
  // Opens the workspace for the signed-in person and restores what was kept.
  async open({ relayOrigin, ownerToken, workspace, passphrase }) {
    await ready;
    store = await Store.open(workspace ?? 'default', passphrase);
    core = new TabCore(relayOrigin, ownerToken);
    relay = relayOrigin;
    const problems = [];
    core.onEvent((event) => {
      if (event.type === 'audit') {
        store.appendAudit(event.record).catch((e) => emit({ type: 'warning', message: `audit not kept: ${e}` }));
        if (event.record.outcome?.type === 'proposal_saved') persistProposals().catch(() => {});
      }
      emit(event);
    });
    for (const source of await store.sources()) core.addSource(source);
    const documents = [];
    for (const { value, error } of await store.documents()) {
      if (error) problems.push(error); else documents.push(value);
    }
    // The index from its snapshot when that covers exactly these documents; otherwise from
    // their text, and a fresh snapshot is written.
    const snapshot = await store.getIndexSnapshot();
    const restored = core.restoreDocuments(documents, snapshot.value ?? null);
    for (const { error } of restored.refused) problems.push(`a document could not be restored: ${error}`);
    const index = snapshot.error
      ? { from: restored.index, reason: 'damaged', message: snapshot.error }
      : { from: restored.index, reason: restored.reason, message: restored.message };
    if (index.reason === 'damaged') problems.push(`${index.message}: the documents were indexed again, nothing is lost`);
    if (index.from !== 'snapshot') indexChanged();
    const grants = await store.getPlain('grants');
    if (grants) { try { core.setGrants(grants); } catch { problems.push('the saved AI access settings were unreadable: access is off'); } }
    const pairing = await store.getSealed('pairing');
    if (pairing.error) problems.push(pairing.error);
    else if (pairing.value) { try { core.importPairing(pairing.value); } catch (e) { problems.push(e.message); } }
    const proposals = await store.getSealed('proposals');
    if (proposals.error) problems.push(proposals.error);
    else if (proposals.value) { try { core.restoreProposals(JSON.parse(proposals.value)); } catch { problems.push('saved proposals were unreadable and were skipped'); } }
    return { problems, index, pairing: core.pairing(), documents: core.documents(), sources: core.sources(), grants: core.grants(), passphrase: store.protectedByPassphrase };
  },
  // Protects the workspace at rest with a passphrase, or with null goes back to the device key.
  async setPassphrase(passphrase) { await store.setPassphrase(passphrase); indexChanged(); return store.protectedByPassphrase; },
  async unlock(passphrase) { await store.unlock(passphrase); },
  async addSource(name) { core.addSource(name); await store.putSource(name); },
  async putDocuments(documents) {
    for (const doc of documents) {
      core.addSource(doc.source);
      core.putDocument(doc);
    }
    indexChanged();
    await store.putDocuments(documents);
    return documents.length;
  },
  async removeDocument(id) { core.removeDocument(id); indexChanged(); await store.deleteDocument(id); },
  // Writes the search index snapshot now, rather than when changes stop.
  async saveIndex() { await saveIndex(); },
  document(id) { return core.document(id); },
  documents() { return core.documents(); },
  sources() { return core.sources(); },
  // Stored as the core gives them back: with the pins that bind each granted host tool.
  async setGrants(grants) { core.setGrants(grants); await store.putPlain('grants', core.grants()); },
  grants() { return core.grants(); },
  allTools() { return core.allTools(); },
  registerTool(spec) {
    core.registerTool(spec, (args) => new Promise((resolve, reject) => {
      const call = nextToolCall++;
      toolCalls.set(call, { resolve, reject });
      self.postMessage({ tool: { call, name: spec.name, args, session: core.session()?.sessionId ?? null } });
    }));
  },
  unregisterTool(name) { return core.unregisterTool(name); },
  toolResult({ call, ok, result, error, code }) {
    const pending = toolCalls.get(call);
    toolCalls.delete(call);
    if (!pending) return;
    if (ok) pending.resolve(result); else pending.reject(Object.assign(new Error(error), { code }));
  },
  pairing() { return core.pairing(); },
  async newPairing(label) { const shown = await core.newPairing(label); await persistPairing(); return shown; },
  // The pairing is forgotten even when the relay did not take the revocation (already revoked).
  async unpair() { try { await core.unpair(); } finally { await persistPairing(); } },
  async startSession(ttlS) {
    const started = await core.startSession(ttlS);
    await persistPairing();
    return started;
  },
  session() { return core.session(); },
  liveStatus() { return core.liveStatus(); },
  async endSession(keepalive) { await core.endSession(!!keepalive); },
  // Serves until a stop; with takeOver, steals the lock from another tab of this origin.
  async serve({ takeOver } = {}) {
    if (serving) return 'already_serving';
    // Taking over without a session of its own would only stop the tab that serves: this tab
    // stops as it would have (`session_ended`) and takes nothing.
    if (takeOver && !core.session()) return await core.serve();
    const pairId = core.pairing()?.pairId ?? 'none';
    const options = takeOver ? { steal: true } : { ifAvailable: true };
    serving = navigator.locks.request(`sealpost-serve-${pairId}`, options, async (lock) => {
      if (!lock) return 'served_elsewhere';
      channel.postMessage({ type: 'serving', tabId });
      return await core.serve();
    }).catch((error) => {
      // The lock was stolen by another tab: stop within this long-poll.
      if (error?.name === 'AbortError') { core.stop('taken_over'); return 'taken_over'; }
      throw error;
    }).finally(() => { serving = null; });
    return await serving;
  },
  // Whether another tab of this origin serves this pairing now (it holds the serving lock).
  async servedElsewhere() {
    const pairId = core.pairing()?.pairId;
    if (!pairId || serving) return false;
    const { held } = await navigator.locks.query();
    return held.some((lock) => lock.name === `sealpost-serve-${pairId}`);
  },
  // A session that was live before a reload, until `until`: a fresh one on the same pairing
  // (the ephemeral keys of the old one died with the page, as they should).
  async resume(until) {
    if (!core.pairing() || !(until > Date.now() + 1000)) return null;
    return await core.startSession(Math.floor((until - Date.now()) / 1000));
  },
  stop(reason) { core.stop(reason); },
  pendingProposals() { return core.pendingProposals(); },
  async applyProposal(id) {
    const applied = core.applyProposal(id);
    await persistProposals();
    if (applied.docId) { indexChanged(); await store.putDocuments([core.document(applied.docId)]); }
    return applied;
  },
  async rejectProposal(id) { core.rejectProposal(id); await persistProposals(); },
  async auditLog() { return await store.auditLog(); },
  // Locking stops serving at once, drops the session's keys and ends the session at the relay
  // (so the plugin's next call is answered at once instead of waiting for a tab), and drops the
  // sealing key from memory: under a passphrase, nothing sealed opens again until `unlock`.
  // A snapshot still waiting to be written is written first, while the key is there.
  async lock() {
    core.stop('locked');
    await core.endSession(true).catch(() => {});
    if (indexTimer) await saveIndex().catch(() => {});
    store.forgetKey();
  },
  setOwnerToken(token) { core.setOwnerToken(token); },
};

self.onmessage = async (message) => {
  const { id, method, args } = message.data;
  try {
    const result = await methods[method](...(args ?? []));
    self.postMessage({ id, ok: true, result });
  } catch (error) {
    const message = String(error?.message ?? error);
    // TabCore's "the relay did not answer": say which of the two causes it was.
    const code = error?.code ?? (message.startsWith(UNANSWERED) && relay ? await unansweredCause(relay) : undefined);
    self.postMessage({ id, ok: false, error: message, code });
  }
};

// How TabCore's error begins when a request got no answer the page may read.
const UNANSWERED = 'the relay did not answer';
