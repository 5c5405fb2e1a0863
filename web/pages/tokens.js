// Tokens: the plugin tokens (a pairing's), the sign-ins of this owner in every app, and their
// unused sign-in links, each revocable.

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
  say('The paired plugin’s token is revoked, and its pairing is gone. To pair again: start a session under AI access for a new pairing code, then run “sealpost pair --replace” with it on the plugin’s computer.');
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

// The app a token or link belongs to, in a person's words.
function appName(origin) {
  return origin ?? 'This app';
}

// Who made a link: a listed sign-in (by when it signed in), this device, or the operator.
function maker(link, devices) {
  if (!link.minted_by) return 'The operator, or a team sign-in';
  const device = devices.find((d) => d.id === link.minted_by);
  if (!device) return 'A sign-in no longer listed';
  return device.current ? 'This device' : `The sign-in of ${when(device.created_at)} (${appName(device.app_origin)})`;
}

export async function renderTokens() {
  const [tokens, { tokens: devices }, { links }, pairing] = await Promise.all([mcpTokens(), api('GET', '/v1/owner-tokens'), api('GET', '/v1/signin-links'), state.tab.pairing()]);
  const from = (d) => {
    const parent = devices.find((p) => p.id === d.parent_id);
    if (!d.parent_id) return '';
    return parent ? `a link of the sign-in of ${when(parent.created_at)}` : 'a link of a sign-in no longer listed';
  };
  main.replaceChildren(h('h2', { text: 'Tokens' }),
    h('p', { class: 'muted', text: 'Each paired plugin holds one token. Revoking one stops that plugin at its next call.' }),
    tokens.length ? h('table', {}, h('thead', {}, h('tr', {}, h('th', { text: 'Label' }), h('th', { text: 'App' }), h('th', { text: 'Created' }), h('th', { text: 'Expires' }), h('th', { text: '' }))),
      h('tbody', {}, tokens.map((t) => h('tr', {}, h('td', { class: 'free' }, t.label, t.id === pairing?.tokenId ? h('span', { class: 'muted', text: ' (this tab\u2019s pairing)' }) : ''), h('td', { text: appName(t.app_origin) }), h('td', { text: when(t.created_at) }), h('td', { text: when(t.expires_at) }),
        h('td', {}, h('button', { 'aria-label': `Revoke ${t.label}`, onclick: async () => {
          await api('DELETE', `/v1/mcp-tokens/${t.id}`);
          if ((await state.tab.pairing())?.tokenId === t.id) await pairingRevoked();
          else say('Token revoked.');
          state.focusNext = 'main td button';
          renderTokens();
        } }, 'Revoke'))))))
      : h('p', { text: 'No plugin tokens.' }),
    h('h3', { text: 'Signed-in devices' }),
    h('p', { class: 'muted', text: 'Each browser you signed in with, in this app and in the other apps you use with this relay. Signing one out stops it at its next request, and with it every sign-in made from its links, the links it made that are still unused, and the sessions they started; sign in there again with a new link.' }),
    h('table', { id: 'devices' }, h('thead', {}, h('tr', {}, h('th', { text: 'Signed in' }), h('th', { text: 'App' }), h('th', { text: 'From' }), h('th', { text: 'Lapses' }), h('th', { text: '' }))),
      h('tbody', {}, devices.map((d) => h('tr', { 'data-id': d.id }, h('td', { text: when(d.created_at) }), h('td', { text: appName(d.app_origin) }), h('td', { text: from(d) }), h('td', { text: when(d.expires_at) }),
        h('td', {}, d.current ? h('span', { class: 'muted', text: 'This device' })
          : h('button', { 'aria-label': `Sign out the device signed in ${when(d.created_at)}`, onclick: async () => { await api('DELETE', `/v1/owner-tokens/${d.id}`); say('Device signed out, with what it made.'); state.focusNext = 'main td button'; renderTokens(); } }, 'Sign out')))))),
    h('h3', { text: 'Unused sign-in links' }),
    h('p', { class: 'muted', text: 'Links made for signing in another device that no one has used yet. Revoke one you did not make, or no longer need.' }),
    links.length ? h('table', { id: 'links' }, h('thead', {}, h('tr', {}, h('th', { text: 'For' }), h('th', { text: 'Made by' }), h('th', { text: 'Lapses' }), h('th', { text: '' }))),
      h('tbody', {}, links.map((l) => h('tr', { 'data-id': l.id }, h('td', { text: appName(l.app_origin) }), h('td', { text: maker(l, devices) }), h('td', { text: when(l.expires_at) }),
        h('td', {}, h('button', { 'aria-label': `Revoke the link for ${appName(l.app_origin)} that lapses ${when(l.expires_at)}`, onclick: async () => { await api('DELETE', `/v1/signin-links/${l.id}`); say('Link revoked.'); state.focusNext = 'main td button'; renderTokens(); } }, 'Revoke'))))))
      : h('p', { text: 'No unused sign-in links.' }));
  focusNext();
}
