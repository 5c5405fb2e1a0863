// Sealpost's reference web app: sign in, keep a workspace in this browser, let an AI agent use
// it through the paired plugin, review what it proposes. Plain ES modules; the trusted work
// happens in the browser module (sealpost/), in a Worker.

import { Sealpost } from './sealpost/sealpost.js';

const TOKEN_KEY = 'sealpost.owner-token';
const SESSION_KEY = 'sealpost.session';
// The session lengths a person chooses from, in seconds.
const LENGTHS = [900, 3600, 14400];
const main = document.getElementById('main');
const notice = document.getElementById('notice');
const state = { tab: null, me: null, status: 'Not serving', transport: null, served: 0, errored: 0, refused: 0, lastCall: null, pluginSeen: null, timeline: [], elsewhere: false, session: null, stopReason: null, ttl: '3600' };

// ---------- small helpers ----------

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'text') el.textContent = value;
    else el.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// Replaces `el`'s children with those that apply: replaceChildren itself would print a null
// as the text "null".
function setChildren(el, ...children) {
  el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

function say(message, { error = false } = {}) {
  notice.hidden = !message;
  notice.textContent = message ?? '';
  notice.className = error ? 'bad' : '';
}

async function api(method, path, body) {
  const token = localStorage.getItem(TOKEN_KEY);
  const response = await fetch(path, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  const json = text ? JSON.parse(text) : null;
  if (!response.ok) {
    const error = new Error(json?.error?.message ?? `The relay answered ${response.status}.`);
    error.status = response.status;
    error.code = json?.error?.code;
    throw error;
  }
  return json;
}

function when(ms) {
  if (!ms) return 'never';
  return new Date(ms).toLocaleString();
}

function ago(ms) {
  if (!ms) return 'never';
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  return s < 60 ? `${s} s ago` : `${Math.round(s / 60)} min ago`;
}

// 3600 → "1 hour", 900 → "15 minutes".
function lengthWords(seconds) {
  const [n, unit] = seconds % 3600 === 0 ? [seconds / 3600, 'hour'] : seconds % 60 === 0 ? [seconds / 60, 'minute'] : [seconds, 'second'];
  return `${n} ${unit}${n === 1 ? '' : 's'}`;
}

function left(ms) {
  const s = Math.max(0, Math.round((ms - Date.now()) / 1000));
  return s >= 3600 ? `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

async function docId(source, path) {
  const bytes = new TextEncoder().encode(`${source}\u0000${path}`);
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return `d_${[...digest.slice(0, 12)].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
}

// A Markdown file's title is its first heading with words in it; a text file's is its name
// (a `# ` line in plain text is not a heading).
function titleOf(name, body) {
  const markdown = /\.(md|markdown)$/i.test(name);
  const heading = markdown ? body.match(/^#\s+(.*\w.*)$/m) : null;
  return (heading ? heading[1] : name.replace(/\.(md|markdown|txt|text)$/i, '')).trim().slice(0, 300) || name;
}

// What each built-in tool does, in a person's words; its id stays in small print beside it.
const TOOL_LABELS = {
  search_workspace: 'Search your documents',
  get_source_excerpt: 'Read a passage of a document',
  get_workspace_outline: 'See the titles of your documents',
  list_sources: 'See the names of your sources',
  propose_create_note: 'Propose a new note (you review it)',
  propose_append_note: 'Propose adding to a note (you review it)',
  propose_edit_note: 'Propose an edit to a note (you review it)',
};

function toolLabel(id) {
  return TOOL_LABELS[id] ?? id;
}

function plural(count, one, many = `${one}s`) {
  return `${count} ${count === 1 ? one : many}`;
}

// ---------- sign-in ----------

async function signInFromLink() {
  const match = location.hash.match(/^#signin=([A-Za-z0-9_-]+)/);
  if (!match) return;
  // The code is single-use and secret: out of the address bar and history at once.
  history.replaceState(null, '', location.pathname);
  try {
    const signed = await api('POST', '/v1/auth/signin', { code: match[1] });
    localStorage.setItem(TOKEN_KEY, signed.token);
  } catch (error) {
    const why = error.code === 'invalid_signin_code' ? 'it is unknown, used or expired (each link works once, for a short time).' : error.message;
    say(`This sign-in link did not work: ${why} Ask whoever runs this relay for a new one (sealpost-relay owner link NAME prints it).`, { error: true });
  }
}

// The navigation and account controls, shown only to a person who may use them.
function showChrome(shown) {
  document.getElementById('nav').hidden = !shown;
  document.getElementById('account').hidden = !shown;
}

function renderSignIn() {
  showChrome(false);
  const input = h('input', { type: 'text', id: 'signin-link', autocomplete: 'off', 'aria-describedby': 'signin-help' });
  main.replaceChildren(
    h('h2', { text: 'Sign in' }),
    h('p', { id: 'signin-help' }, 'Open the sign-in link you were given, or paste it here. Whoever runs this relay makes one with ', h('code', { text: 'sealpost-relay owner add NAME' }), '; each link works once, for a short time.'),
    h('form', { onsubmit: (event) => { event.preventDefault(); const value = input.value.trim(); const code = value.includes('#signin=') ? value.split('#signin=')[1] : value; location.hash = `signin=${code}`; boot(); } },
      h('label', { for: 'signin-link' }, 'Sign-in link'), ' ', input, ' ', h('button', { type: 'submit', class: 'primary' }, 'Sign in')),
  );
}

// ---------- the module ----------

// A call's outcome as Activity shows it: what the tab decided, unless the relay never took the
// answer, in which case the agent never got it and that is what happened.
function outcomeOf(record) {
  return record.delivery?.type === 'not_delivered' ? 'not_delivered' : (record.outcome?.type ?? 'unknown');
}

function outcomeText(record) {
  const o = record.outcome ?? {};
  // An error the tool itself answered (no such document, say) is an answer, not a refusal.
  const type = o.type === 'answered_with_error' ? 'answered: the tool reported an error' : (o.type ?? 'unknown').replaceAll('_', ' ');
  const decided = type + (o.code ? ` (${o.code})` : '') + (o.reason ? ` (${o.reason})` : '');
  return record.delivery?.type === 'not_delivered' ? `not delivered: ${record.delivery.why} (the tab had ${decided})` : decided;
}

function onEvent(event) {
  if (event.type === 'audit') {
    const r = event.record;
    const outcome = outcomeOf(r);
    // Every call lands in exactly one counter, so they add up to the calls the tab saw.
    if (['answered', 'proposal_saved'].includes(outcome)) state.served += 1;
    else if (outcome === 'answered_with_error') state.errored += 1;
    else if (r.call_id) state.refused += 1;
    if (outcome === 'proposal_saved') updateReviewCount();
    if (r.call_id) {
      state.lastCall = r.at_ms;
      state.timeline.unshift({ at: r.at_ms, tool: r.tool ?? '(unopened call)', outcome });
      state.timeline.length = Math.min(state.timeline.length, 10);
    }
  } else if (event.type === 'serving') {
    state.status = 'Serving';
  } else if (event.type === 'stopped') {
    state.status = 'Not serving';
    state.stopReason = event.reason;
    if (event.reason === 'token_revoked') { signedOut('This sign-in was revoked or has expired. Sign in again.'); return; }
    if (event.reason === 'taken_over') say('Another Sealpost tab took over serving. This tab stopped.');
    if (event.reason === 'expired') say('The session ended: its time ran out. Start a new one under AI access; the paired plugin carries on without pairing again.');
    if (['expired', 'session_ended'].includes(event.reason)) {
      // The pairing code goes with the session it served.
      state.session = null;
      sessionStorage.removeItem(SESSION_KEY);
      if (location.hash === '#/access') renderPairing();
    }
  } else if (event.type === 'retrying') {
    state.status = 'Reconnecting…';
  } else if (event.type === 'transport') {
    state.transport = event.transport;
  } else if (event.type === 'elsewhere') {
    state.elsewhere = true;
  } else if (event.type === 'warning') {
    console.warn(event.message);
  }
  updatePill();
  showExpiryWarning();
  statusSoon();
}

// Calls can come tens a second: the status is redrawn at most every quarter second, so the
// page's own drawing does not take the CPU the calls need.
let statusTimer = null;
function statusSoon() {
  if (statusTimer) return;
  statusTimer = setTimeout(() => {
    statusTimer = null;
    if (location.hash === '#/access' && !document.querySelector('#access-status')?.contains(document.activeElement)) renderStatus();
  }, 250);
}

function updatePill() {
  const pill = document.getElementById('status-pill');
  pill.textContent = state.status;
  pill.className = state.status === 'Serving' ? 'ok' : 'muted';
}

function serve({ takeOver = false } = {}) {
  state.tab.serve({ takeOver }).then((reason) => {
    if (reason === 'served_elsewhere') { state.status = 'Served by another tab'; updatePill(); render(); }
  }).catch((error) => say(`Serving stopped: ${error.message}`, { error: true }));
}

// Opens the module; a workspace protected by a passphrase asks for it first. Answers whether
// the workspace is open.
async function openModule(token, passphrase) {
  try {
    state.tab = await Sealpost.open({ ownerToken: token, workspace: state.me.owner.id, passphrase });
  } catch (error) {
    if (error.code === 'passphrase_required' || error.code === 'wrong_passphrase') {
      renderUnlock(token, passphrase ? error.message : null);
      return false;
    }
    throw error;
  }
  state.tab.on('*', onEvent);
  state.tab.endOnPagehide();
  const problems = state.tab.restored.problems;
  if (problems.length) say(problems.join(' '), { error: true });
  // A session that was live in this tab before a reload (or a lock) goes on, on the same
  // pairing. The marker is per tab (sessionStorage): a new tab does not start serving by itself.
  try {
    const kept = JSON.parse(sessionStorage.getItem(SESSION_KEY) ?? 'null');
    const resumed = kept ? await state.tab.resume(kept.until) : null;
    // Steal the lock: the worker of the page before the reload may not have let go yet.
    if (resumed) { keepSession(resumed, kept.length); serve({ takeOver: true }); }
  } catch (error) {
    say(`The session could not be resumed: ${error.message} Start a new one under AI access.`, { error: true });
  }
  return true;
}

function renderUnlock(token, problem) {
  showChrome(false);
  const input = h('input', { type: 'password', id: 'unlock-passphrase', autocomplete: 'current-password', required: true });
  setChildren(main,
    h('h2', { text: 'Unlock' }),
    h('p', { text: 'A passphrase protects this workspace in this browser. Enter it to open your documents and serve calls.' }),
    problem ? h('p', { class: 'bad', role: 'alert', text: problem }) : null,
    h('form', { onsubmit: async (event) => {
      event.preventDefault();
      if (await openModule(token, input.value)) { showChrome(true); render(); }
    } }, h('label', { for: 'unlock-passphrase' }, 'Passphrase'), ' ', input, ' ', h('button', { type: 'submit', class: 'primary' }, 'Unlock')));
  input.focus();
}

function passphraseCard() {
  const isSet = state.tab.restored.passphrase;
  const input = h('input', { type: 'password', id: 'new-passphrase', autocomplete: 'new-password', minlength: 8, 'aria-describedby': 'passphrase-help' });
  const change = async (passphrase) => {
    try {
      state.tab.restored.passphrase = await state.tab.setPassphrase(passphrase);
      say(state.tab.restored.passphrase ? 'A passphrase now protects this workspace. Keep it safe: without it the workspace cannot be opened.' : 'The passphrase is removed.');
      renderWorkspace();
    } catch (error) { say(error.message, { error: true }); }
  };
  return h('section', { class: 'card', 'aria-labelledby': 'passphrase-heading' },
    h('h3', { id: 'passphrase-heading', text: 'Passphrase' }),
    h('p', { id: 'passphrase-help', class: 'muted', text: isSet
      ? 'A passphrase protects this workspace: documents, proposals, activity and the pairing are sealed under a key made from it, and opening Sealpost asks for it.'
      : 'Optional. With a passphrase, documents, proposals, activity and the pairing are sealed under a key made from it (at least 8 characters), and opening Sealpost asks for it. Forgotten, it cannot be recovered.' }),
    h('form', { onsubmit: (event) => { event.preventDefault(); change(input.value); } },
      h('label', { for: 'new-passphrase' }, isSet ? 'New passphrase' : 'Passphrase'), ' ', input, ' ',
      h('button', { type: 'submit' }, isSet ? 'Change passphrase' : 'Set passphrase'),
      isSet ? h('button', { type: 'button', id: 'remove-passphrase', onclick: () => change(null) }, 'Remove passphrase') : null));
}

function signedOut(message) {
  localStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(SESSION_KEY);
  state.tab?.stop('signed_out').catch(() => {});
  state.tab?.close();
  state.tab = null;
  say(message);
  renderSignIn();
}

// ---------- pages ----------

const pages = {
  '#/workspace': renderWorkspace,
  '#/access': renderAccess,
  '#/review': renderReview,
  '#/activity': renderActivity,
  '#/tokens': renderTokens,
  '#/leaves': renderLeaves,
};

function render() {
  if (!state.tab) return;
  updateReviewCount();
  const route = pages[location.hash] ? location.hash : '#/workspace';
  for (const link of document.querySelectorAll('nav a')) {
    if (link.getAttribute('href') === route) link.setAttribute('aria-current', 'page'); else link.removeAttribute('aria-current');
  }
  pages[route]().catch((error) => say(error.message, { error: true }));
}

async function renderWorkspace() {
  const sources = await state.tab.sources();
  const documents = await state.tab.documents();
  // The source of the last import, so the next folder lands in the same one.
  const sourceInput = h('input', { type: 'text', id: 'source-name', value: state.lastSource ?? sources[0] ?? 'notes', autocomplete: 'off' });
  const progress = h('progress', { id: 'import-progress', max: 1, value: 0, hidden: true, 'aria-label': 'Import progress' });
  const progressText = h('p', { id: 'import-status', role: 'status', 'aria-live': 'polite', text: state.importStatus ?? '' });
  const files = h('input', { type: 'file', id: 'pick-files', multiple: true, accept: '.md,.markdown,.txt,.text,text/*' });
  const folder = h('input', { type: 'file', id: 'pick-folder', webkitdirectory: true, multiple: true });
  const importFiles = async (list) => {
    const source = sourceInput.value.trim() || 'notes';
    const chosen = list.filter((f) => /\.(md|markdown|txt|text)$/i.test(f.name) || f.type.startsWith('text/'));
    if (!chosen.length) { progressText.textContent = 'No Markdown or text files were chosen: Sealpost imports .md and .txt files.'; return; }
    progress.hidden = false; progress.max = chosen.length; progress.value = 0;
    const batch = [];
    let done = 0;
    for (const file of chosen) {
      const path = file.relativePath || file.webkitRelativePath || file.name;
      const body = await file.text();
      batch.push({ id: await docId(source, path), source, title: titleOf(file.name, body), body, updated_at_ms: file.lastModified || Date.now() });
      if (batch.length === 100) { done += await state.tab.putDocuments(batch.splice(0)); progress.value = done; progressText.textContent = `Imported ${done} of ${chosen.length} files…`; }
    }
    if (batch.length) done += await state.tab.putDocuments(batch.splice(0));
    progress.value = done;
    state.importStatus = `Imported ${done} files into ${source}.`;
    state.lastSource = source;
    state.focusNext = '#filter';
    // A person who went to another page meanwhile stays there; the status waits for them.
    if (location.hash === '#/workspace' || !pages[location.hash]) renderWorkspace();
  };
  files.addEventListener('change', () => importFiles([...files.files]));
  folder.addEventListener('change', () => importFiles([...folder.files]));
  const drop = h('div', { class: 'drop', id: 'drop' }, 'Drop Markdown or text files, or whole folders, here.');
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', async (e) => {
    e.preventDefault(); drop.classList.remove('over');
    const collected = [];
    const walk = async (entry, prefix) => {
      if (entry.isFile) { const file = await new Promise((ok, fail) => entry.file(ok, fail)); file.relativePath = prefix + file.name; collected.push(file); }
      else if (entry.isDirectory) {
        const reader = entry.createReader();
        for (;;) { const batch = await new Promise((ok, fail) => reader.readEntries(ok, fail)); if (!batch.length) break; for (const child of batch) await walk(child, `${prefix}${entry.name}/`); }
      }
    };
    for (const item of [...e.dataTransfer.items]) { const entry = item.webkitGetAsEntry?.(); if (entry) await walk(entry, ''); }
    importFiles(collected);
  });
  const filter = h('input', { type: 'search', id: 'filter', placeholder: 'Filter by title', 'aria-label': 'Filter documents by title' });
  const rows = (needle) => documents
    .filter((d) => !needle || d.title.toLowerCase().includes(needle.toLowerCase()))
    .sort((a, b) => a.source.localeCompare(b.source) || a.title.localeCompare(b.title))
    .map((d) => h('tr', {}, h('td', {}, h('a', { href: '#/workspace', onclick: (e) => { e.preventDefault(); editDocument(d.id); } }, d.title)), h('td', { text: d.source }), h('td', { text: `${d.chars}` })));
  const body = h('tbody', {}, rows(''));
  filter.addEventListener('input', () => body.replaceChildren(...rows(filter.value)));
  main.replaceChildren(
    h('h2', { text: 'Workspace' }),
    h('p', { class: 'muted' }, 'Your documents live only in this browser. Nothing here leaves it unless you turn on AI access, and then only what you grant, sealed.'),
    h('section', { class: 'card', 'aria-labelledby': 'import-heading' },
      h('h3', { id: 'import-heading', text: 'Import' }),
      h('div', { class: 'row' }, h('label', { for: 'source-name' }, 'Into source'), sourceInput),
      h('div', { class: 'row' }, h('label', { for: 'pick-files' }, 'Files'), files),
      h('div', { class: 'row' }, h('label', { for: 'pick-folder' }, 'A folder'), folder),
      drop, progress, progressText),
    passphraseCard(),
    h('section', { 'aria-labelledby': 'docs-heading' },
      h('h3', { id: 'docs-heading', text: `Documents (${documents.length}) in ${plural(sources.length, 'source')}` }),
      h('div', { class: 'row' }, filter),
      h('table', {}, h('thead', {}, h('tr', {}, h('th', { text: 'Title' }), h('th', { text: 'Source' }), h('th', { text: 'Characters' }))), body)),
  );
  focusNext();
}

async function editDocument(id) {
  const doc = await state.tab.document(id);
  if (!doc) { say('That document is gone.'); return renderWorkspace(); }
  const title = h('input', { type: 'text', id: 'doc-title', value: doc.title });
  const text = h('textarea', { id: 'doc-body' }); text.value = doc.body;
  main.replaceChildren(
    h('h2', { text: 'Edit document' }),
    h('p', { class: 'muted', text: `In ${doc.source}` }),
    h('div', { class: 'row' }, h('label', { for: 'doc-title' }, 'Title'), title),
    h('label', { for: 'doc-body' }, 'Text'), text,
    h('div', { class: 'row' },
      h('button', { class: 'primary', onclick: async () => { await state.tab.putDocuments([{ ...doc, title: title.value, body: text.value, updated_at_ms: Date.now() }]); say('Saved.'); renderWorkspace(); } }, 'Save'),
      h('button', { onclick: async () => { if (confirm(`Delete “${doc.title}”?`)) { await state.tab.removeDocument(doc.id); say('Deleted.'); renderWorkspace(); } } }, 'Delete'),
      h('button', { onclick: () => renderWorkspace() }, 'Back')),
  );
  title.focus();
}

async function renderAccess() {
  const grants = await state.tab.grants();
  const sources = await state.tab.sources();
  const tools = await state.tab.allTools();
  const on = h('input', { type: 'checkbox', id: 'access-on', checked: grants.access === 'on' });
  const sourceBoxes = sources.map((s) => h('label', {}, h('input', { type: 'checkbox', name: 'grant-source', value: s, checked: grants.sources.includes(s) }), ` ${s}`));
  const toolBoxes = tools.map((t) => h('label', {}, h('input', { type: 'checkbox', name: 'grant-tool', value: t.name, checked: t.granted }), ` ${toolLabel(t.name)} `,
    h('small', { class: 'muted tool-id', text: t.name }),
    t.kind === 'proposal' && !TOOL_LABELS[t.name] ? ' (proposes changes for you to review)' : '',
    // A page's own tool: its description is the page's word, and each call asks first.
    t.source === 'page' ? h('span', { class: 'muted' }, ` — from this page, asks you before each call: “${t.description}”`) : '',
    t.changedSinceGrant ? h('span', { class: 'muted' }, ' (changed since you allowed it: allow it again if you still want it)') : ''));
  const save = async () => {
    const chosen = (name) => [...document.querySelectorAll(`input[name="${name}"]:checked`)].map((i) => i.value);
    await state.tab.setGrants({ access: on.checked ? 'on' : 'off', sources: chosen('grant-source'), tools: chosen('grant-tool') });
    say('AI access saved. It applies to the next call, and a running session offers the change at once.');
    return chosen('grant-tool').length;
  };
  // The chosen length stays chosen: for the next session, and for extending this one.
  const lengths = [...new Set([...LENGTHS, Number(state.ttl)])].sort((a, b) => a - b);
  const ttl = h('select', { id: 'ttl', onchange: () => { state.ttl = ttl.value; } },
    lengths.map((seconds) => h('option', { value: String(seconds), selected: String(seconds) === state.ttl }, lengthWords(seconds))));
  main.replaceChildren(
    h('h2', { text: 'AI access' }),
    h('section', { class: 'card', 'aria-labelledby': 'grants-heading' },
      h('h3', { id: 'grants-heading', text: 'What an AI agent may use' }),
      h('div', { class: 'row' }, on, h('label', { for: 'access-on' }, 'Allow AI access (off by default)')),
      h('fieldset', {}, h('legend', { text: 'Sources' }), sources.length ? sourceBoxes.map((b) => h('div', {}, b)) : h('p', { class: 'muted', text: 'Import documents first.' })),
      h('fieldset', {}, h('legend', { text: 'Tools' }), toolBoxes.map((b) => h('div', {}, b))),
      h('button', { class: 'primary', id: 'save-grants', onclick: save }, 'Save access')),
    h('section', { class: 'card', 'aria-labelledby': 'session-heading' },
      h('h3', { id: 'session-heading', text: 'Session' }),
      h('p', { class: 'muted', text: 'A session is the time an AI agent may call this tab. When it ends, calls stop until you start another; the paired plugin carries on without pairing again.' }),
      h('div', { class: 'row' }, h('label', { for: 'ttl' }, 'Length'), ttl,
        h('button', { class: 'primary', id: 'start-session', onclick: async () => {
          if (sessionLive()) return;
          const granted = await save();
          // A session that offers nothing would only hand out a code for an empty tool list.
          if (!on.checked) { say('Switch AI access on, and grant the tools an agent may use, before starting a session.', { error: true }); on.focus(); return; }
          if (!granted) { say('Grant at least one tool before starting a session: with none, an agent could do nothing.', { error: true }); document.querySelector('input[name="grant-tool"]')?.focus(); return; }
          keepSession(await state.tab.startSession(Number(state.ttl)), Number(state.ttl) * 1000);
          state.served = 0; state.errored = 0; state.refused = 0; state.timeline = []; state.status = 'Starting…';
          state.pluginSeen = null; state.showCode = false;
          state.focusNext = '#copy-code';
          serve({ takeOver: true });
          render();
        } }, 'Start session'),
        h('button', { id: 'end-session', onclick: async () => { await state.tab.endSession(); state.session = null; sessionStorage.removeItem(SESSION_KEY); say('Session ended.'); render(); } }, 'End session')),
      h('p', { id: 'session-hint', class: 'muted', 'aria-live': 'polite' }),
      h('div', { id: 'pairing' })),
    h('section', { class: 'card', id: 'access-status', 'aria-labelledby': 'status-heading' }, h('h3', { id: 'status-heading', text: 'Status' })),
    h('section', { class: 'card', 'aria-labelledby': 'unpair-heading' },
      h('h3', { id: 'unpair-heading', text: 'Pairing' }),
      h('p', {}, 'Unpairing revokes the plugin’s token at once; pair again with a new code.'),
      h('button', { id: 'unpair', onclick: async () => { await state.tab.unpair(); state.session = null; sessionStorage.removeItem(SESSION_KEY); say('Unpaired: the plugin’s token is revoked.'); render(); } }, 'Unpair')),
  );
  await renderPairing();
  renderStatus();
  focusNext();
  refreshPluginSeen().then(() => { if (location.hash === '#/access') renderStatus(); });
}

// After an action the page is drawn anew; focus goes to what the person does next, not back to
// the top of the page.
function focusNext() {
  if (!state.focusNext) return;
  document.querySelector(state.focusNext)?.focus();
  state.focusNext = null;
}

async function renderPairing() {
  const box = document.getElementById('pairing');
  if (!box) return;
  const pairing = await state.tab.pairing();
  const session = await state.tab.session();
  if (pairing && !session && await state.tab.servedElsewhere()) {
    box.replaceChildren(h('p', {}, 'Another Sealpost tab is serving this pairing now, and the paired plugin is using it. Starting a session here ends that tab\u2019s session; the plugin carries on with this tab, without pairing again.'));
    return;
  }
  if (!pairing || !session) { box.replaceChildren(h('p', { class: 'muted', text: 'No session is running. Start one to get a pairing code.' })); return; }
  // The plugin's token revoked elsewhere (another device's Tokens page): this code is dead.
  if (!(await mcpTokens().catch(() => null) ?? [{ id: pairing.tokenId }]).some((t) => t.id === pairing.tokenId)) {
    box.replaceChildren(h('p', {}, 'The paired plugin’s token was revoked, so this pairing code no longer works. ',
      h('button', { id: 'pair-again', onclick: pairingRevoked }, 'Make a new pairing')));
    return;
  }
  const code = pairing.pairingCode;
  // Once the plugin has paired, the secret code goes out of sight until asked for.
  if (state.pluginSeen && !state.showCode) {
    box.replaceChildren(h('p', {}, 'The plugin is paired and uses this session. ',
      h('button', { id: 'show-code', onclick: () => { state.showCode = true; renderPairing(); } }, 'Show the pairing code again')));
    return;
  }
  box.replaceChildren(
    h('p', {}, 'On the computer where your MCP client runs, pair once:'),
    h('p', { class: 'code', id: 'pair-command', text: 'sealpost pair' }),
    h('p', {}, 'and paste this pairing code when asked (it is a secret: it lets the plugin call this tab):'),
    h('p', { class: 'code', id: 'pairing-code', text: code }),
    h('div', { class: 'row' }, h('button', { id: 'copy-code', onclick: async () => { await navigator.clipboard.writeText(code); say('Pairing code copied.'); } }, 'Copy pairing code')),
    h('p', {}, 'Check that the plugin shows the same fingerprint: ', h('span', { class: 'fingerprint', id: 'fingerprint', text: `${pairing.fingerprint.slice(0, 3)} ${pairing.fingerprint.slice(3)}` })),
    h('p', { class: 'muted', text: 'The fingerprint is a short check that the plugin paired with this tab and this relay: `sealpost pair` prints the same letters. If they differ, do not use that plugin.' }),
  );
}

// The session this tab serves, and how long it was started for (which decides when the page
// warns that it is running out). Kept per tab, so a reload resumes it.
function keepSession(started, lengthMs) {
  state.session = started;
  state.sessionLengthMs = lengthMs || started.expiresAt - Date.now();
  sessionStorage.setItem(SESSION_KEY, JSON.stringify({ until: started.expiresAt, length: state.sessionLengthMs }));
  showExpiryWarning();
}

// Warned this long before the end: five minutes, or a quarter of a shorter session.
function warnBeforeMs() {
  return Math.min(5 * 60_000, (state.sessionLengthMs ?? 0) / 4);
}

// Before a session runs out, every page says when, and offers to extend it: a new session of
// the chosen length on the same pairing, which the plugin takes up without pairing again.
function showExpiryWarning() {
  const banner = document.getElementById('session-warning');
  const endsAt = state.session?.expiresAt ?? 0;
  const due = state.status !== 'Not serving' && endsAt > Date.now() && endsAt - Date.now() <= warnBeforeMs();
  if (!due) { banner.hidden = true; banner.dataset.endsAt = ''; return; }
  if (banner.dataset.endsAt === String(endsAt)) return;
  banner.dataset.endsAt = String(endsAt);
  setChildren(banner,
    h('span', { text: `The AI session ends at ${new Date(endsAt).toLocaleTimeString()}: after that, the agent's calls are refused. ` }),
    h('button', { id: 'extend-session', onclick: extendSession }, `Extend by ${lengthWords(Number(state.ttl))}`));
  banner.hidden = false;
}

async function extendSession() {
  // The claim loop goes on into the new session, and says `ready` once the relay has seen it
  // there: only then is the plugin's next call sure to find the tab. (Heard from before the
  // start: the event may come before the start's own answer.)
  const ready = new Set();
  const unsubscribe = state.tab.on('ready', (event) => ready.add(event.sessionId));
  try {
    keepSession(await state.tab.startSession(Number(state.ttl)), Number(state.ttl) * 1000);
    // One that stopped meanwhile starts again.
    if (state.status === 'Not serving') serve({ takeOver: true });
    for (let waited = 0; !ready.has(state.session.sessionId) && waited < 10_000; waited += 50) {
      await new Promise((ok) => setTimeout(ok, 50));
    }
  } catch (error) {
    say(`The session could not be extended: ${error.message}`, { error: true });
    return;
  } finally {
    unsubscribe();
  }
  say(`Session extended: it now ends at ${new Date(state.session.expiresAt).toLocaleTimeString()}. The paired plugin carries on without pairing again.`);
  if (location.hash === '#/access') { renderStatus(); renderPairing(); }
}

// A live session is ended before another starts: starting over it would leave the tab serving
// neither for a while. The button says so rather than doing it.
function sessionLive() {
  return !!state.session && state.session.expiresAt > Date.now() && state.status !== 'Not serving';
}

function renderSessionButtons() {
  const start = document.getElementById('start-session');
  if (!start) return;
  const live = sessionLive();
  start.disabled = live;
  document.getElementById('end-session').disabled = !state.session;
  const hint = document.getElementById('session-hint');
  if (hint) hint.textContent = live ? 'A session is running. End it to start another with a different length.' : '';
}

function renderStatus() {
  renderSessionButtons();
  const box = document.getElementById('access-status');
  if (!box) return;
  const rows = [
    ['State', state.status],
    ['Calls answered', state.served],
    ['Answered with the tool\u2019s error', state.errored],
    ['Calls refused or not delivered', state.refused],
    ['Last call', ago(state.lastCall)],
    ['Plugin last seen', ago(state.pluginSeen)],
    ['Connection', { channel: 'WebSocket', http: 'HTTP requests' }[state.transport] ?? '—'],
    ['Time left', state.session ? left(state.session.expiresAt) : '—'],
  ];
  setChildren(box,
    h('h3', { id: 'status-heading', text: 'Status' }),
    h('table', {}, h('tbody', {}, rows.map(([k, v]) => h('tr', {}, h('th', { scope: 'row', text: k }), h('td', { text: String(v) }))))),
    state.elsewhere ? h('p', {}, 'Another Sealpost tab served this pairing. ', h('button', { onclick: () => serve({ takeOver: true }) }, 'Serve from this tab')) : null,
    h('h3', { text: 'Recent calls' }),
    state.timeline.length ? h('ol', { id: 'timeline' }, state.timeline.map((t) => h('li', {}, `${new Date(t.at).toLocaleTimeString()} — ${t.tool}: ${t.outcome.replaceAll('_', ' ')}`))) : h('p', { class: 'muted', text: 'No calls yet.' }),
  );
}

// Unchanged lines more than this far from a change are folded away.
const DIFF_CONTEXT = 2;

// A line diff showing the changes with a little context: a one-line append to a long note is a
// few lines, not the whole note.
function diffLines(before, after) {
  const a = before ? before.split('\n') : []; const b = after.split('\n');
  const ops = [];
  let i = 0; let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) { ops.push(['same', a[i]]); i++; j++; }
    else if (j < b.length && !a.slice(i).includes(b[j])) { ops.push(['ins', b[j]]); j++; }
    else { ops.push(['del', a[i]]); i++; }
  }
  const near = ops.map(() => false);
  ops.forEach(([type], at) => {
    if (type === 'same') return;
    for (let k = Math.max(0, at - DIFF_CONTEXT); k <= Math.min(ops.length - 1, at + DIFF_CONTEXT); k++) near[k] = true;
  });
  const out = [];
  let folded = 0;
  const fold = () => { if (folded) out.push(h('span', { class: 'muted' }, `  … ${folded} unchanged line${folded === 1 ? '' : 's'} …\n`)); folded = 0; };
  ops.forEach(([type, text], at) => {
    if (type === 'same' && !near[at]) { folded++; return; }
    fold();
    out.push(type === 'same' ? h('span', {}, `  ${text}\n`) : type === 'ins' ? h('ins', {}, `+ ${text}\n`) : h('del', {}, `- ${text}\n`));
  });
  fold();
  return out;
}

// The number of proposals waiting, on the navigation, so a person sees there is something to do.
async function updateReviewCount() {
  const link = document.querySelector('nav a[href="#/review"]');
  if (!link || !state.tab) return;
  const waiting = (await state.tab.pendingProposals().catch(() => [])).length;
  link.textContent = waiting ? `Review (${waiting})` : 'Review';
  link.setAttribute('aria-label', waiting ? `Review, ${waiting} proposal${waiting === 1 ? '' : 's'} waiting` : 'Review');
}

async function renderReview() {
  const proposals = await state.tab.pendingProposals();
  const items = [];
  for (const p of proposals) {
    const change = p.change;
    let before = ''; let after = ''; let what = '';
    if (change.type === 'create_note') { what = `New note “${change.title}” in ${change.source}`; after = change.body; }
    else {
      const doc = await state.tab.document(change.doc_id);
      before = doc?.body ?? '';
      what = `${change.type === 'append_note' ? 'Append to' : 'Edit'} “${doc?.title ?? change.doc_id}”`;
      after = change.type === 'append_note' ? `${before}${before.endsWith('\n') || !before ? '' : '\n'}${change.text}` : before.replace(change.find, change.replace);
    }
    items.push(h('article', { class: 'card', 'aria-label': what },
      h('h3', { text: what }),
      h('p', { class: 'muted', text: `Proposed by an AI agent (${toolLabel(p.tool).toLowerCase()}) at ${when(p.created_at_ms)}` }),
      h('div', { class: 'row' },
        h('button', { class: 'primary', onclick: async () => { try { await state.tab.applyProposal(p.id); say('Applied.'); } catch (e) { say(`Not applied: ${e.message}`, { error: true }); } renderReview(); } }, 'Approve'),
        h('button', { onclick: async () => { await state.tab.rejectProposal(p.id); say('Rejected.'); renderReview(); } }, 'Reject')),
      h('pre', { class: 'diff' }, diffLines(before, after))));
  }
  updateReviewCount();
  main.replaceChildren(h('h2', { text: 'Review' }),
    h('p', { class: 'muted', text: 'An AI agent can only propose changes. Nothing changes until you approve it here.' }),
    ...(items.length ? items : [h('p', { text: 'Nothing to review.' })]));
}

async function renderActivity() {
  const { entries, unreadable } = await state.tab.auditLog();
  const tools = [...new Set(entries.map((e) => e.tool).filter(Boolean))].sort();
  const outcomes = [...new Set(entries.map(outcomeOf))].sort();
  const toolFilter = h('select', { id: 'filter-tool' }, h('option', { value: '' }, 'All tools'), tools.map((t) => h('option', { value: t }, t)));
  const outcomeFilter = h('select', { id: 'filter-outcome' }, h('option', { value: '' }, 'All outcomes'), outcomes.map((o) => h('option', { value: o }, o.replaceAll('_', ' '))));
  const body = h('tbody');
  const fill = () => body.replaceChildren(...entries
    .filter((e) => (!toolFilter.value || e.tool === toolFilter.value) && (!outcomeFilter.value || outcomeOf(e) === outcomeFilter.value))
    .map((e) => h('tr', {}, h('td', { text: when(e.at_ms) }), h('td', { text: e.tool ? toolLabel(e.tool) : '—' }), h('td', { text: outcomeText(e) }), h('td', { text: e.reply_bytes ? `${e.reply_bytes.toLocaleString()} bytes` : '—' }))));
  toolFilter.addEventListener('change', fill); outcomeFilter.addEventListener('change', fill);
  fill();
  setChildren(main, h('h2', { text: 'Activity' }),
    h('p', { class: 'muted', text: 'Every call and review, kept encrypted in this browser. Arguments are kept only as a digest.' }),
    h('div', { class: 'row' }, h('label', { for: 'filter-tool' }, 'Tool'), toolFilter, h('label', { for: 'filter-outcome' }, 'Outcome'), outcomeFilter),
    unreadable ? h('p', { class: 'bad', text: `${unreadable} entries could not be read and are not shown.` }) : null,
    h('table', {}, h('thead', {}, h('tr', {}, h('th', { text: 'When' }), h('th', { text: 'Tool' }), h('th', { text: 'Outcome' }), h('th', { text: 'Answer size' }))), body));
}

// Every page of the MCP token list (the relay pages it by id), oldest first.
// The paired plugin's token is revoked: its pairing is dead, so the tab ends the session and
// forgets it; the next session makes a new pairing code, which is what the plugin's own message
// asks for (`sealpost pair --replace` with the new code).
async function pairingRevoked() {
  await state.tab.unpair().catch(() => {});
  state.session = null; state.pluginSeen = null; state.showCode = false;
  sessionStorage.removeItem(SESSION_KEY);
  say('The paired plugin’s token is revoked, and its pairing is gone. To pair again: start a session under AI access for a new pairing code, then run `sealpost pair --replace` with it on the plugin’s computer.');
  if (location.hash === '#/access') render();
}

async function mcpTokens() {
  const tokens = [];
  let after = null;
  do {
    const page = await api('GET', `/v1/mcp-tokens${after ? `?after=${after}` : ''}`);
    tokens.push(...page.tokens);
    after = page.next ?? null;
  } while (after);
  return tokens.sort((a, b) => a.created_at - b.created_at);
}

async function renderTokens() {
  const [tokens, { tokens: devices }, pairing] = await Promise.all([mcpTokens(), api('GET', '/v1/owner-tokens'), state.tab.pairing()]);
  main.replaceChildren(h('h2', { text: 'Tokens' }),
    h('p', { class: 'muted', text: 'Each paired plugin holds one token. Revoking one stops that plugin at its next call.' }),
    tokens.length ? h('table', {}, h('thead', {}, h('tr', {}, h('th', { text: 'Label' }), h('th', { text: 'Created' }), h('th', { text: 'Expires' }), h('th', { text: '' }))),
      h('tbody', {}, tokens.map((t) => h('tr', {}, h('td', {}, t.label, t.id === pairing?.tokenId ? h('span', { class: 'muted', text: ' (this tab\u2019s pairing)' }) : ''), h('td', { text: when(t.created_at) }), h('td', { text: when(t.expires_at) }),
        h('td', {}, h('button', { 'aria-label': `Revoke ${t.label}`, onclick: async () => {
          await api('DELETE', `/v1/mcp-tokens/${t.id}`);
          if ((await state.tab.pairing())?.tokenId === t.id) await pairingRevoked();
          else say('Token revoked.');
          renderTokens();
        } }, 'Revoke'))))))
      : h('p', { text: 'No plugin tokens.' }),
    h('h3', { text: 'Signed-in devices' }),
    h('p', { class: 'muted', text: 'Each browser you signed in with. Signing one out stops it at its next request; sign in there again with a new link.' }),
    h('table', {}, h('thead', {}, h('tr', {}, h('th', { text: 'Signed in' }), h('th', { text: 'Lapses' }), h('th', { text: '' }))),
      h('tbody', {}, devices.map((d) => h('tr', {}, h('td', { text: when(d.created_at) }), h('td', { text: when(d.expires_at) }),
        h('td', {}, d.current ? h('span', { class: 'muted', text: 'This device' })
          : h('button', { 'aria-label': `Sign out the device signed in ${when(d.created_at)}`, onclick: async () => { await api('DELETE', `/v1/owner-tokens/${d.id}`); say('Device signed out.'); renderTokens(); } }, 'Sign out')))))));
}

async function renderLeaves() {
  const grants = await state.tab.grants();
  const session = await state.tab.session();
  const aiOn = grants.access === 'on' && !!session;
  main.replaceChildren(h('h2', { text: 'What leaves this tab' }),
    h('p', {}, `This app talks to one server: the relay at ${location.host}, which also served this page. It makes no other request.`),
    h('table', {}, h('thead', {}, h('tr', {}, h('th', { text: 'Route' }), h('th', { text: 'Now' }), h('th', { text: 'What crosses it' }))),
      h('tbody', {},
        h('tr', {}, h('td', { text: 'Sign-in and sign-out' }), h('td', { text: 'used once per sign-in' }), h('td', { text: 'The one-time sign-in code, then a token that identifies you to the relay. No document text.' })),
        h('tr', {}, h('td', { text: 'Tokens page' }), h('td', { text: 'on when you open it' }), h('td', { text: 'The labels and dates of your plugin tokens and of your signed-in devices.' })),
        h('tr', {}, h('td', { text: 'AI access: session and calls' }), h('td', { text: aiOn ? 'on' : 'off' }), h('td', { text: 'A session record (ids, times, and the tool list sealed under your pairing key), then for each call: ids, sizes, timings, and the call and its answer encrypted so that only this tab and your paired plugin can read them. The relay cannot.' })),
        h('tr', {}, h('td', { text: 'Your documents, proposals and activity' }), h('td', { text: 'never sent' }), h('td', { text: 'They stay in this browser’s storage. Only the answer to a call you granted leaves, sealed so that only your paired plugin can open it.' })))),
    h('p', {}, 'The relay serves this app’s code. Someone who controls the relay could change that code; Sealpost’s security notes (SECURITY.md, shipped with Sealpost) say what that means and how to serve a build you checked.'));
}

// ---------- boot ----------

async function boot() {
  await signInFromLink();
  const token = localStorage.getItem(TOKEN_KEY);
  if (!token) { renderSignIn(); return; }
  try {
    state.me = await api('GET', '/v1/me');
  } catch (error) {
    if (error.status === 401) { signedOut('Your sign-in has ended. Sign in again with a new link.'); return; }
    say(`The relay did not answer: ${error.message} Check your connection and reload.`, { error: true });
    return;
  }
  if (state.me.token) localStorage.setItem(TOKEN_KEY, state.me.token);
  showChrome(true);
  if (!state.tab && !await openModule(localStorage.getItem(TOKEN_KEY))) return;
  render();
}

document.getElementById('signout').addEventListener('click', async () => {
  await state.tab?.stop('signed_out');
  await state.tab?.endSession().catch(() => {});
  await api('POST', '/v1/auth/signout', {}).catch(() => {});
  signedOut('Signed out.');
});
document.getElementById('lock').addEventListener('click', async () => {
  await state.tab?.lock();
  state.tab?.close();
  state.tab = null;
  say('Locked. Reload the page to unlock.');
  showChrome(false);
  main.replaceChildren(h('h2', { text: 'Locked' }), h('p', { text: 'Sealpost is locked: nothing is served and its keys are out of memory. Reload to unlock.' }));
});
// A notice belongs to the page it was said on: moving to another page clears it.
addEventListener('hashchange', () => { if (location.hash.startsWith('#signin=')) boot(); else { say(null); render(); main.focus(); } });
// When the plugin last looked the session up: only the relay knows. Asked every 5 s while the
// page is open; an unreachable relay leaves the last answer in place.
async function refreshPluginSeen() {
  const live = await state.tab?.liveStatus().catch(() => undefined);
  if (live === undefined) return;
  state.pluginSeen = live?.pluginSeenAgoMs == null ? null : Date.now() - live.pluginSeenAgoMs;
}

setInterval(showExpiryWarning, 1000);
setInterval(async () => {
  if (location.hash !== '#/access') return;
  const paired = !!state.pluginSeen;
  await refreshPluginSeen();
  if (location.hash !== '#/access') return;
  renderStatus();
  if (!paired && state.pluginSeen && document.getElementById('pairing-code')) renderPairing();
}, 5000);
boot();
