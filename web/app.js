// Sealpost's reference web app: sign in, keep a workspace in this browser, let an AI agent use
// it through the paired plugin, review what it proposes. Plain ES modules, no build step; the
// trusted work happens in the browser module (sealpost/), in a Worker. This file signs the
// person in, opens the module, routes between the pages (pages/) and turns the module's events
// into the state the pages show (ui.js).

import { Sealpost } from './sealpost/sealpost.js';
import { signIn, startTeamSignIn, teamSignInOffered } from './sealpost/auth.js';
import { SESSION_KEY, TOKEN_KEY, api, h, main, phase, phaseWords, say, setChildren, state } from './ui.js';
import { followPlugin, keepSession, renderAccess, renderPairing, serve, showExpiryWarning, statusSoon } from './pages/access.js';
import { outcomeOf, renderActivity } from './pages/activity.js';
import { renderLeaves } from './pages/leaves.js';
import { renderReview, updateReviewCount } from './pages/review.js';
import { renderTokens } from './pages/tokens.js';
import { renderWorkspace } from './pages/workspace.js';

async function signInFromLink() {
  const match = location.hash.match(/^#signin=([A-Za-z0-9_-]+)/);
  if (!match) return;
  // The code is single-use and secret: out of the address bar and history at once.
  history.replaceState(null, '', location.pathname);
  try {
    // auth.js adds the verifier this tab kept when it started a team sign-in.
    const signed = await signIn(match[1], location.origin);
    localStorage.setItem(TOKEN_KEY, signed.token);
  } catch (error) {
    const why = error.code === 'invalid_signin_code' ? 'it is unknown, used or expired.' : error.message;
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
  // Offered only when the relay is set up for the team's identity provider.
  const team = h('div', { id: 'team-signin' });
  teamSignInOffered(location.origin).then((offered) => {
    if (!offered) return;
    const host = new URL(offered.issuer).host;
    team.replaceChildren(
      h('p', {}, h('button', { type: 'button', class: 'primary', id: 'team-signin-button', onclick: () => startTeamSignIn(location.origin).catch((error) => say(`Team sign-in could not start: ${error.message}`, { error: true })) }, 'Sign in with your team\'s account')),
      h('p', { class: 'muted', text: `Through your team's identity provider (${host}). Or use a sign-in link:` }),
    );
  }).catch(() => {});
  main.replaceChildren(
    h('h2', { text: 'Sign in' }),
    team,
    h('p', { id: 'signin-help' }, 'Open the sign-in link you were given, or paste it here; each link works once, for a short time. Whoever runs this relay makes one with ', h('code', { text: 'sealpost-relay owner link NAME' }), ' for someone already signed up, or ', h('code', { text: 'sealpost-relay owner add NAME' }), ' for someone new.'),
    h('form', { onsubmit: (event) => { event.preventDefault(); const value = input.value.trim(); const code = value.includes('#signin=') ? value.split('#signin=')[1] : value; location.hash = `signin=${code}`; boot(); } },
      h('label', { for: 'signin-link' }, 'Sign-in link'), ' ', input, ' ', h('button', { type: 'submit', class: 'primary' }, 'Sign in')),
  );
}

const TAKEN_OVER = 'Another Sealpost tab took over serving. This tab stopped.';

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
    // The loop runs, but a call made before the relay has seen it claim is answered "tab not
    // open": "Serving" waits for `ready`.
    if (state.serving !== 'serving') state.serving = 'starting';
  } else if (['ready', 'claimed'].includes(event.type)) {
    state.serving = 'serving';
  } else if (event.type === 'stopped') {
    state.serving = 'stopped';
    state.stopReason = event.reason;
    if (event.reason === 'token_revoked') { whyRevoked().then(signedOut); return; }
    if (event.reason === 'taken_over') say(TAKEN_OVER);
    if (event.reason === 'expired') say('The session ended: its time ran out. Start a new one under AI access; the paired plugin carries on without pairing again.');
    // This tab forgets its session before it ends one: one it still holds ended elsewhere.
    if (event.reason === 'session_ended' && state.session) endedElsewhere();
    if (['expired', 'session_ended'].includes(event.reason)) {
      // The pairing code goes with the session it served.
      state.session = null;
      sessionStorage.removeItem(SESSION_KEY);
      if (location.hash === '#/access') renderPairing();
    }
  } else if (event.type === 'retrying') {
    state.serving = 'reconnecting';
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

// The session ended, and not by this tab: another tab that took the pairing over (it holds the
// pairing's lock a moment later, whichever of the two the relay and the lock told first) or
// another device.
async function endedElsewhere() {
  for (let waited = 0; waited < 2000; waited += 100) {
    if (await state.tab?.servedElsewhere().catch(() => false)) {
      state.stopReason = 'taken_over';
      say(TAKEN_OVER);
      updatePill();
      statusSoon();
      return;
    }
    await new Promise((ok) => setTimeout(ok, 100));
  }
  say('The session was ended elsewhere (another tab or device of yours). Start a new one under AI access; the paired plugin carries on without pairing again.');
}

export function updatePill() {
  const pill = document.getElementById('status-pill');
  pill.textContent = phaseWords();
  pill.className = ['serving', 'expiring'].includes(phase()) ? 'ok' : 'muted';
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

// Why the relay stopped taking this sign-in: its own words when the team's identity provider
// no longer confirms the person (a team sign-in's re-check), else the usual sentence.
async function whyRevoked() {
  const usual = 'This sign-in was revoked or has expired. Sign in again.';
  try {
    await api('GET', '/v1/me');
    return usual;
  } catch (error) {
    return error.status === 401 && error.message.includes('identity provider') ? error.message : usual;
  }
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

const pages = {
  '#/workspace': renderWorkspace,
  '#/access': renderAccess,
  '#/review': renderReview,
  '#/activity': renderActivity,
  '#/tokens': renderTokens,
  '#/leaves': renderLeaves,
};

// The page the address names; Workspace for any other.
export function currentRoute() {
  return pages[location.hash] ? location.hash : '#/workspace';
}

export function render() {
  if (!state.tab) return;
  updateReviewCount();
  const route = currentRoute();
  for (const link of document.querySelectorAll('nav a')) {
    if (link.getAttribute('href') === route) link.setAttribute('aria-current', 'page'); else link.removeAttribute('aria-current');
  }
  pages[route]().catch((error) => say(error.message, { error: true }));
}

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

// The session's clock moves the phase on its own (serving, ending soon, stopped).
setInterval(() => { updatePill(); showExpiryWarning(); }, 1000);

setInterval(() => { if (location.hash === '#/access') followPlugin(); }, 5000);

boot();
