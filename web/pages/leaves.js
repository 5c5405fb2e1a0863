// What leaves this tab: what the relay sees of a call, and what it never does.

import { h, main, state } from '../ui.js';

export async function renderLeaves() {
  const grants = await state.tab.grants();
  const session = await state.tab.session();
  const aiOn = grants.access === 'on' && !!session;
  main.replaceChildren(h('h2', { text: 'What leaves this tab' }),
    h('p', {}, `This app talks to one server: the relay at ${location.host}, which also served this page. It makes no other request.`),
    h('table', {}, h('thead', {}, h('tr', {}, h('th', { text: 'Route' }), h('th', { text: 'Now' }), h('th', { text: 'What crosses it' }))),
      h('tbody', {},
        h('tr', {}, h('td', { text: 'Sign-in and sign-out' }), h('td', { text: 'used once per sign-in' }), h('td', { text: 'The one-time sign-in code, then a token that identifies you to the relay. No document text.' })),
        h('tr', {}, h('td', { text: 'Tokens page' }), h('td', { text: 'on when you open it' }), h('td', { text: 'The labels, apps and dates of your plugin tokens, of your signed-in devices and of your unused sign-in links (never a link’s code).' })),
        h('tr', {}, h('td', { text: 'AI access: session and calls' }), h('td', { text: aiOn ? 'on' : 'off' }), h('td', { text: 'A session record (ids, times, and the tool list sealed under your pairing key), then for each call: ids, sizes, timings, and the call and its answer encrypted so that only this tab and your paired plugin can read them. The relay cannot.' })),
        h('tr', {}, h('td', { text: 'Your documents, proposals and activity' }), h('td', { text: 'never sent' }), h('td', { text: 'They stay in this browser’s storage. Only the answer to a call you granted leaves, sealed so that only your paired plugin can open it.' })))),
    h('p', {}, 'The relay serves this app’s code. Someone who controls the relay could change that code; Sealpost’s security notes (SECURITY.md, shipped with Sealpost) say what that means and how to serve a build you checked.'));
}
