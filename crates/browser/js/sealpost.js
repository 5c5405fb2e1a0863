// The page's API to Sealpost's browser module. The module runs in a dedicated Worker
// (worker.js); this proxies each method to it and runs host tools' handlers in the page.
//
//   const tab = await Sealpost.open({ ownerToken });
//   await tab.registerTool({ name: 'word_count', description: '…', inputSchema: {...}, kind: 'read' },
//                          async ({ text }) => ({ text: String(text.split(/\s+/).length) }));
//   await tab.setGrants({ access: 'on', sources: ['notes'], tools: ['search_workspace', 'word_count'] });
//   const { pairingCode, fingerprint } = await tab.startSession(3600);
//   tab.on('stopped', ({ reason }) => …);
//   tab.serve();
//
// Tools the page registers through the W3C WebMCP API (`document.modelContext.registerTool`)
// are offered too, once the person grants them, and each call waits for the person's
// confirmation in the page (webmcp.js, confirm.js). `open({ webmcp: false })` turns that off.
//
// TypeScript declarations: sealpost.d.ts.

import { AuthError, readSignInLink, renew, signIn, startTeamSignIn, teamSignInOffered } from './auth.js';
import { Confirmations } from './confirm.js';
import { WebMcpBridge, installModelContext, pageModelContext } from './webmcp.js';

// A page with no WebMCP implementation gets Sealpost's, so its tools can be registered before
// (or without) a tab being open.
installModelContext();

export { AuthError };

// How many warnings `tab.warnings` keeps (the oldest go first).
const MAX_WARNINGS_KEPT = 100;

function closedError() {
  return Object.assign(new Error('This Sealpost tab is closed: open another with Sealpost.open.'), { name: 'SealpostError', code: 'closed' });
}

export class Sealpost {
  constructor(worker) {
    this.worker = worker;
    this.nextId = 1;
    this.pending = new Map();
    this.listeners = new Map();
    this.handlers = new Map();
    // Every warning and refused page tool, from the start: those raised while `open()` ran
    // came before any listener could be added.
    this.warnings = [];
    worker.onmessage = (message) => this.receive(message.data);
    worker.onerror = (error) => this.dispatch({ type: 'warning', message: `the Sealpost worker failed: ${error.message}` });
  }

  // Signing in before a tab is open (auth.js): a host app needs no knowledge of the relay's
  // auth endpoints. Each resolves to `{ token, owner, expiresAt, appOrigin }`.
  static readSignInLink(hashOrUrl) { return readSignInLink(hashOrUrl); }
  static signIn(code, relayOrigin) { return signIn(code, relayOrigin); }
  static renew(token, relayOrigin) { return renew(token, relayOrigin); }
  // Team sign-in through the team's identity provider, when the relay offers it.
  static teamSignInOffered(relayOrigin) { return teamSignInOffered(relayOrigin); }
  static startTeamSignIn(relayOrigin) { return startTeamSignIn(relayOrigin); }

  // Starts the worker and opens the workspace. `relayOrigin` defaults to this page's origin.
  // A workspace protected by a passphrase opens only with it: without it the promise rejects
  // with `error.code === 'passphrase_required'`, with a wrong one `'wrong_passphrase'`.
  // `onWarning` hears every `warning` and `tool_refused` event, those raised during `open()`
  // included (they are also kept in `tab.warnings`).
  static async open({ ownerToken, relayOrigin: given, workspace = 'default', workerUrl, passphrase, webmcp = true, confirmWithinMs, onWarning } = {}) {
    // `null` too (a sign-in link without `relay=`) means this page's own relay.
    const relayOrigin = given ?? location.origin;
    // Written out in full so that bundlers (Vite) see the Worker and bundle it with the wasm.
    const worker = workerUrl
      ? new Worker(workerUrl, { type: 'module' })
      : new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
    const tab = new Sealpost(worker);
    tab.relayOrigin = relayOrigin;
    tab.ownerToken = ownerToken;
    if (typeof onWarning === 'function') {
      tab.on('warning', onWarning);
      tab.on('tool_refused', onWarning);
    }
    try {
      tab.restored = await tab.call('open', { relayOrigin, ownerToken, workspace, passphrase });
      const { context, problem } = webmcp ? pageModelContext() : { context: null };
      if (problem) tab.warn(problem);
      if (context) {
        tab.confirmations = new Confirmations({ withinMs: confirmWithinMs });
        tab.bridge = new WebMcpBridge(context, tab);
        await tab.bridge.start();
        tab.on('stopped', () => tab.confirmations.declineAll('the session stopped'));
      }
    } catch (error) {
      tab.close();
      throw error;
    }
    return tab;
  }

  receive(data) {
    if (data.event) { this.dispatch(data.event); return; }
    if (data.tool) { this.runTool(data.tool); return; }
    const pending = this.pending.get(data.id);
    if (!pending) return;
    this.pending.delete(data.id);
    if (data.ok) pending.resolve(data.result); else pending.reject(Object.assign(new Error(data.error), { code: data.code }));
  }

  dispatch(event) {
    if (event.type === 'warning' || event.type === 'tool_refused') {
      this.warnings.push(event);
      if (this.warnings.length > MAX_WARNINGS_KEPT) this.warnings.shift();
    }
    for (const listener of [...(this.listeners.get(event.type) ?? []), ...(this.listeners.get('*') ?? [])]) {
      try { listener(event); } catch (error) { console.error(error); }
    }
  }

  // A warning of the page's side, also said on the console (a host may not listen).
  warn(message) {
    console.warn(`Sealpost: ${message}`);
    this.dispatch({ type: 'warning', message });
  }

  async runTool({ call, name, args, session }) {
    try {
      let result;
      if (this.bridge?.has(name)) {
        // A page's tool: only once the person allows this call (or the tool, for the session).
        if (this.confirmations.needed(session, name)) {
          const description = (await this.allTools()).find((tool) => tool.name === name)?.description ?? '';
          await this.confirmations.confirm({ session, tool: name, description, args });
        }
        result = await this.bridge.execute(name, args);
      } else {
        const handler = this.handlers.get(name);
        if (!handler) throw new Error(`no handler for ${name}`);
        result = await handler(args);
      }
      this.worker.postMessage({ method: 'toolResult', args: [{ call, ok: true, result }] });
    } catch (error) {
      this.worker.postMessage({ method: 'toolResult', args: [{ call, ok: false, error: String(error?.message ?? error), code: error?.code }] });
    }
  }

  call(method, ...args) {
    if (this.closed) return Promise.reject(closedError());
    const id = this.nextId++;
    const answered = new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, method, args });
    });
    // The tools a grant picker lists changed: it need not poll.
    if (method === 'registerTool' || method === 'unregisterTool') {
      return answered.then((result) => { this.dispatch({ type: 'tools_changed' }); return result; });
    }
    return answered;
  }

  // Subscribes to events: 'audit', 'serving', 'ready', 'claimed', 'retrying', 'retrying_answer',
  // 'transport', 'stopped', 'elsewhere', 'index_saved', 'warning', 'tool_refused',
  // 'tools_changed', or '*' for all. Returns a function that unsubscribes.
  on(type, listener) {
    if (!this.listeners.has(type)) this.listeners.set(type, new Set());
    this.listeners.get(type).add(listener);
    return () => this.listeners.get(type).delete(listener);
  }

  registerTool(spec, handler) { this.handlers.set(spec.name, handler); return this.call('registerTool', spec); }
  addSource(name) { return this.call('addSource', name); }
  putDocuments(documents) { return this.call('putDocuments', documents); }
  removeDocument(id) { return this.call('removeDocument', id); }
  saveIndex() { return this.call('saveIndex'); }
  document(id) { return this.call('document', id); }
  documents() { return this.call('documents'); }
  sources() { return this.call('sources'); }
  setGrants(grants) { return this.call('setGrants', grants); }
  grants() { return this.call('grants'); }
  allTools() { return this.call('allTools'); }
  pairing() { return this.call('pairing'); }
  newPairing(label = 'The sealpost plugin, paired from a browser tab') { return this.call('newPairing', label); }
  unpair() { this.sessionId = null; return this.call('unpair'); }
  async startSession(ttlS) { return this.remember(await this.call('startSession', ttlS)); }
  async resume(until) { return this.remember(await this.call('resume', until)); }

  remember(started) {
    this.sessionId = started?.sessionId ?? this.sessionId;
    return started;
  }
  session() { return this.call('session'); }
  servedElsewhere() { return this.call('servedElsewhere'); }
  liveStatus() { return this.call('liveStatus'); }
  endSession({ keepalive = false } = {}) { this.sessionId = null; return this.call('endSession', keepalive); }
  serve({ takeOver = false } = {}) { return this.call('serve', { takeOver }); }
  stop(reason) { return this.call('stop', reason); }
  lock() { return this.call('lock'); }
  pendingProposals() { return this.call('pendingProposals'); }
  applyProposal(id) { return this.call('applyProposal', id); }
  rejectProposal(id) { return this.call('rejectProposal', id); }
  auditLog() { return this.call('auditLog'); }
  setPassphrase(passphrase) { return this.call('setPassphrase', passphrase); }
  unlock(passphrase) { return this.call('unlock', passphrase); }
  setOwnerToken(token) { this.ownerToken = token; return this.call('setOwnerToken', token); }

  // Ends the worker: every key it held is gone with it. Use after sign-out or lock. A call
  // waiting then, and every call after, rejects at once with `code: 'closed'`.
  close() {
    this.closed = true;
    this.bridge?.stop();
    this.confirmations?.declineAll('the tab closed');
    this.worker.terminate();
    for (const { reject } of this.pending.values()) reject(closedError());
    this.pending.clear();
  }

  // Ends the session when the page goes away, so the plugin says "tab not open" at once. The
  // page sends the request itself (keepalive): the worker may be gone before it could.
  endOnPagehide() {
    addEventListener('pagehide', () => {
      if (this.sessionId && this.ownerToken) {
        fetch(`${this.relayOrigin}/v1/sessions/${this.sessionId}`, {
          method: 'DELETE', keepalive: true, headers: { authorization: `Bearer ${this.ownerToken}` },
        }).catch(() => {});
      }
      this.worker.postMessage({ id: 0, method: 'endSession', args: [true] });
    });
  }
}
