// What every page shares: the app's state, the element helper, the notice, the relay's API and
// the words and numbers a person reads.

// Where the sign-in and this tab's live session are kept between reloads.
export const TOKEN_KEY = 'sealpost.owner-token';
export const SESSION_KEY = 'sealpost.session';
export const main = document.getElementById('main');
const notice = document.getElementById('notice');

// What the pages show, kept up to date by the module's events (app.js). `serving` is what the
// claim loop last said: 'idle', 'starting', 'serving', 'reconnecting', 'elsewhere' or 'stopped'
// (why: `stopReason`); every part of a page reads it through `phase()`.
export const state = { tab: null, me: null, serving: 'idle', transport: null, served: 0, errored: 0, refused: 0, lastCall: null, pluginSeen: null, timeline: [], elsewhere: false, session: null, stopReason: null, ttl: '3600' };

// Warned this long before a session's end: five minutes, or a quarter of a shorter session.
export function warnBeforeMs() {
  return Math.min(5 * 60_000, (state.sessionLengthMs ?? 0) / 4);
}

// The one answer the pill, the buttons, the warning and the status give to "what is this tab
// doing", from the claim loop's last word and the session's clock, so no two can disagree.
export function phase() {
  const { serving, session } = state;
  if (serving === 'elsewhere') return 'elsewhere';
  if (serving === 'idle' || serving === 'stopped' || !session || session.expiresAt <= Date.now()) return 'stopped';
  if (serving === 'starting' || serving === 'reconnecting') return serving;
  return session.expiresAt - Date.now() <= warnBeforeMs() ? 'expiring' : 'serving';
}

const PHASE_WORDS = {
  stopped: 'Not serving', starting: 'Starting…', serving: 'Serving', expiring: 'Serving, ending soon',
  reconnecting: 'Reconnecting…', elsewhere: 'Served by another tab',
};
const STOP_WORDS = {
  locked: 'the app was locked', signed_out: 'you signed out', session_ended: 'the session was ended',
  expired: 'the session\u2019s time ran out', token_revoked: 'the sign-in was revoked', taken_over: 'another tab took over',
};

// The phase in words; stopped, with why when the loop said.
export function phaseWords(long = false) {
  const current = phase();
  const why = long && current === 'stopped' && STOP_WORDS[state.stopReason];
  return why ? `${PHASE_WORDS.stopped}: ${why}` : PHASE_WORDS[current];
}

// A session the tab serves (or is about to): not started over (see access.js).
export function sessionLive() {
  return ['starting', 'serving', 'expiring', 'reconnecting'].includes(phase());
}

// An element with attributes (`on…` listeners, `text`) and children.
export function h(tag, attrs = {}, ...children) {
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
export function setChildren(el, ...children) {
  el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

export function say(message, { error = false } = {}) {
  notice.hidden = !message;
  notice.textContent = message ?? '';
  notice.className = error ? 'bad' : '';
}

export async function api(method, path, body) {
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

export function when(ms) {
  if (!ms) return 'never';
  return new Date(ms).toLocaleString();
}

export function ago(ms) {
  if (!ms) return 'never';
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  return s < 60 ? `${s} s ago` : `${Math.round(s / 60)} min ago`;
}

// 3600 → "1 hour", 900 → "15 minutes".
export function lengthWords(seconds) {
  const [n, unit] = seconds % 3600 === 0 ? [seconds / 3600, 'hour'] : seconds % 60 === 0 ? [seconds / 60, 'minute'] : [seconds, 'second'];
  return `${n} ${unit}${n === 1 ? '' : 's'}`;
}

export function left(ms) {
  const s = Math.max(0, Math.round((ms - Date.now()) / 1000));
  return s >= 3600 ? `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

// What each built-in tool does, in a person's words; its id stays in small print beside it.
export const TOOL_LABELS = {
  search_workspace: 'Search your documents',
  get_source_excerpt: 'Read a passage of a document',
  get_workspace_outline: 'See the titles of your documents',
  list_sources: 'See the names of your sources',
  propose_create_note: 'Propose a new note (you review it)',
  propose_append_note: 'Propose adding to a note (you review it)',
  propose_edit_note: 'Propose an edit to a note (you review it)',
};

export function toolLabel(id) {
  return TOOL_LABELS[id] ?? id;
}

export function plural(count, one, many = `${one}s`) {
  return `${count} ${count === 1 ? one : many}`;
}

// After an action the page is drawn anew; focus goes to what the person does next, not back to
// the top of the page.
export function focusNext() {
  if (!state.focusNext) return;
  // What comes next may be gone (the last proposal approved): then the page itself.
  (document.querySelector(state.focusNext) ?? main).focus();
  state.focusNext = null;
}
