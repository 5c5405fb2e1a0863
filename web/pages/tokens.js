// Tokens: the plugin tokens (a pairing's) and the sign-ins of this owner, each revocable.

import { SESSION_KEY, api, focusNext, h, main, say, state, when } from '../ui.js';
import { render } from '../app.js';

// Every page of the MCP token list (the relay pages it by id), oldest first.
// The paired plugin's token is revoked: its pairing is dead, so the tab ends the session and
// forgets it; the next session makes a new pairing code, which is what the plugin's own message
// asks for (`sealpost pair --replace` with the new code).
export async function pairingRevoked() {
  state.session = null; state.pluginSeen = null; state.showCode = false;
  await state.tab.unpair().catch(() => {});
  sessionStorage.removeItem(SESSION_KEY);
  say('The paired plugin’s token is revoked, and its pairing is gone. To pair again: start a session under AI access for a new pairing code, then run `sealpost pair --replace` with it on the plugin’s computer.');
  if (location.hash === '#/access') render();
}

export async function mcpTokens() {
  const tokens = [];
  let after = null;
  do {
    const page = await api('GET', `/v1/mcp-tokens${after ? `?after=${after}` : ''}`);
    tokens.push(...page.tokens);
    after = page.next ?? null;
  } while (after);
  return tokens.sort((a, b) => a.created_at - b.created_at);
}

export async function renderTokens() {
  const [tokens, { tokens: devices }, pairing] = await Promise.all([mcpTokens(), api('GET', '/v1/owner-tokens'), state.tab.pairing()]);
  main.replaceChildren(h('h2', { text: 'Tokens' }),
    h('p', { class: 'muted', text: 'Each paired plugin holds one token. Revoking one stops that plugin at its next call.' }),
    tokens.length ? h('table', {}, h('thead', {}, h('tr', {}, h('th', { text: 'Label' }), h('th', { text: 'Created' }), h('th', { text: 'Expires' }), h('th', { text: '' }))),
      h('tbody', {}, tokens.map((t) => h('tr', {}, h('td', {}, t.label, t.id === pairing?.tokenId ? h('span', { class: 'muted', text: ' (this tab\u2019s pairing)' }) : ''), h('td', { text: when(t.created_at) }), h('td', { text: when(t.expires_at) }),
        h('td', {}, h('button', { 'aria-label': `Revoke ${t.label}`, onclick: async () => {
          await api('DELETE', `/v1/mcp-tokens/${t.id}`);
          if ((await state.tab.pairing())?.tokenId === t.id) await pairingRevoked();
          else say('Token revoked.');
          state.focusNext = 'main td button';
          renderTokens();
        } }, 'Revoke'))))))
      : h('p', { text: 'No plugin tokens.' }),
    h('h3', { text: 'Signed-in devices' }),
    h('p', { class: 'muted', text: 'Each browser you signed in with. Signing one out stops it at its next request; sign in there again with a new link.' }),
    h('table', {}, h('thead', {}, h('tr', {}, h('th', { text: 'Signed in' }), h('th', { text: 'Lapses' }), h('th', { text: '' }))),
      h('tbody', {}, devices.map((d) => h('tr', {}, h('td', { text: when(d.created_at) }), h('td', { text: when(d.expires_at) }),
        h('td', {}, d.current ? h('span', { class: 'muted', text: 'This device' })
          : h('button', { 'aria-label': `Sign out the device signed in ${when(d.created_at)}`, onclick: async () => { await api('DELETE', `/v1/owner-tokens/${d.id}`); say('Device signed out.'); state.focusNext = 'main td button'; renderTokens(); } }, 'Sign out')))))));
  focusNext();
}
