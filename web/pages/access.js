// AI access: what an agent may use, the session (its length, pairing code, expiry warning and
// extension) and its live status.

import { SESSION_KEY, TOOL_LABELS, ago, focusNext, h, left, lengthWords, main, phase, phaseWords, say, sessionLive, setChildren, state, toolLabel } from '../ui.js';
import { refreshStepsCard, stepsCard } from '../steps.js';
import { render, updatePill } from '../app.js';
import { mcpTokens, pairingRevoked } from './tokens.js';

const STEPS_LEFT = 'Still to do before an agent can use this tab';

// The session lengths a person chooses from, in seconds.
const LENGTHS = [900, 3600, 14400];

// Calls can come tens a second: the status is redrawn at most every quarter second, so the
// page's own drawing does not take the CPU the calls need.
let statusTimer = null;

export function statusSoon() {
  if (statusTimer) return;
  statusTimer = setTimeout(() => {
    statusTimer = null;
    if (location.hash === '#/access' && !document.querySelector('#access-status')?.contains(document.activeElement)) renderStatus();
  }, 250);
}

export function serve({ takeOver = false } = {}) {
  state.tab.serve({ takeOver }).then((reason) => {
    if (reason === 'served_elsewhere') { state.serving = 'elsewhere'; updatePill(); render(); }
  }).catch((error) => say(`Serving stopped: ${error.message}`, { error: true }));
}

export async function renderAccess() {
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
    refreshStepsCard(STEPS_LEFT);
    return chosen('grant-tool').length;
  };
  // The chosen length stays chosen: for the next session, and for extending this one.
  const lengths = [...new Set([...LENGTHS, Number(state.ttl)])].sort((a, b) => a - b);
  const ttl = h('select', { id: 'ttl', onchange: () => { state.ttl = ttl.value; } },
    lengths.map((seconds) => h('option', { value: String(seconds), selected: String(seconds) === state.ttl }, lengthWords(seconds))));
  setChildren(main,
    h('h2', { text: 'AI access' }),
    await stepsCard(STEPS_LEFT),
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
          state.served = 0; state.errored = 0; state.refused = 0; state.timeline = []; state.serving = 'starting';
          state.pluginSeen = null; state.showCode = false;
          state.focusNext = '#copy-code';
          serve({ takeOver: true });
          render();
        } }, 'Start session'),
        h('button', { id: 'end-session', onclick: async () => { state.session = null; await state.tab.endSession(); sessionStorage.removeItem(SESSION_KEY); say('Session ended.'); render(); } }, 'End session')),
      h('p', { id: 'session-hint', class: 'muted', 'aria-live': 'polite' }),
      h('div', { id: 'pairing' })),
    h('section', { class: 'card', id: 'access-status', 'aria-labelledby': 'status-heading' }, h('h3', { id: 'status-heading', text: 'Status' })),
    h('section', { class: 'card', 'aria-labelledby': 'unpair-heading' },
      h('h3', { id: 'unpair-heading', text: 'Pairing' }),
      h('p', {}, 'Unpairing revokes the plugin’s token at once; pair again with a new code.'),
      h('button', { id: 'unpair', onclick: async () => { state.session = null; await state.tab.unpair(); sessionStorage.removeItem(SESSION_KEY); say('Unpaired: the plugin’s token is revoked.'); render(); } }, 'Unpair')),
  );
  await renderPairing();
  renderStatus();
  focusNext();
  followPlugin();
}

// Asks the relay when the plugin last looked the session up and redraws what depends on it: the
// status, and the pairing card, whose secret code goes once the plugin has paired (unless the
// person asked to see it again), wherever the person was when that happened.
export async function followPlugin() {
  await refreshPluginSeen();
  if (location.hash !== '#/access') return;
  renderStatus();
  if (state.pluginSeen && !state.showCode && document.getElementById('pairing-code')) await renderPairing();
}

export async function renderPairing() {
  const box = document.getElementById('pairing');
  if (!box) return;
  refreshStepsCard(STEPS_LEFT);
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
    h('p', { class: 'muted' }, 'The fingerprint is a short check that the plugin paired with this tab and this relay: ', h('code', { text: 'sealpost pair' }), ' prints the same six digits. If they differ, do not use that plugin.'),
  );
}

// The session this tab serves, and how long it was started for (which decides when the page
// warns that it is running out). Kept per tab, so a reload resumes it.
export function keepSession(started, lengthMs) {
  state.session = started;
  state.sessionLengthMs = lengthMs || started.expiresAt - Date.now();
  sessionStorage.setItem(SESSION_KEY, JSON.stringify({ until: started.expiresAt, length: state.sessionLengthMs }));
  showExpiryWarning();
}

// Before a session runs out, every page says when, and offers to extend it: a new session of
// the chosen length on the same pairing, which the plugin takes up without pairing again.
export function showExpiryWarning() {
  const banner = document.getElementById('session-warning');
  const endsAt = state.session?.expiresAt ?? 0;
  if (phase() !== 'expiring') { banner.hidden = true; banner.dataset.endsAt = ''; return; }
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
    if (phase() === 'stopped') serve({ takeOver: true });
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

function renderSessionButtons() {
  const start = document.getElementById('start-session');
  if (!start) return;
  // A live session is ended (or extended) rather than started over: the button says so.
  const live = sessionLive();
  start.disabled = live;
  document.getElementById('end-session').disabled = !state.session;
  const hint = document.getElementById('session-hint');
  if (hint) hint.textContent = live ? 'A session is running. End it to start another with a different length.' : '';
}

export function renderStatus() {
  renderSessionButtons();
  const box = document.getElementById('access-status');
  if (!box) return;
  const rows = [
    ['State', phaseWords(true)],
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
    state.timeline.length ? h('ol', { id: 'timeline' }, state.timeline.map((t) => h('li', {}, `${new Date(t.at).toLocaleTimeString()} — ${toolLabel(t.tool)}: ${t.outcome.replaceAll('_', ' ')}`))) : h('p', { class: 'muted', text: 'No calls yet.' }),
  );
}

// When the plugin last looked the session up: only the relay knows. Asked every 5 s while the
// page is open; an unreachable relay leaves the last answer in place.
export async function refreshPluginSeen() {
  const live = await state.tab?.liveStatus().catch(() => undefined);
  if (live === undefined) return;
  state.pluginSeen = live?.pluginSeenAgoMs == null ? null : Date.now() - live.pluginSeenAgoMs;
}
