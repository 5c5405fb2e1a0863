// A host app on the @sealpost/browser package: it signs the person in, opens the module,
// registers two tools (one through the module, one through the W3C WebMCP API), lets the
// person grant them and starts a session whose pairing code an MCP client's plugin takes.

import { Sealpost } from '@sealpost/browser';
import './style.css';

// The relay this page speaks to: `?relay=…`, or the one `cargo xtask run` starts. The relay
// must list this page's origin (`sealpost-relay serve --app-origin …`).
const relayOrigin = new URLSearchParams(location.search).get('relay') ?? 'http://127.0.0.1:8080';

const $ = (id) => document.getElementById(id);
const say = (text) => { $('status').textContent = text; };

// The person's owner token: `#token=…`, or the one-time code of a sign-in link (`#signin=…`,
// from `sealpost-relay owner link NAME`) exchanged at the relay. Neither stays in the address
// bar. The token lives in this page's memory only.
async function signIn() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  history.replaceState(null, '', location.pathname + location.search);
  if (fragment.has('token')) return fragment.get('token');
  const code = fragment.get('signin');
  if (!code) throw new Error('Open this page from a sign-in link (…#signin=CODE).');
  const answer = await fetch(`${relayOrigin}/v1/auth/signin`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code }),
  });
  const body = await answer.json().catch(() => null);
  if (!answer.ok) throw new Error(body?.error?.message ?? `The relay refused the sign-in (${answer.status}).`);
  return body.token;
}

const textInput = {
  type: 'object',
  properties: { text: { type: 'string', description: 'The text.' } },
  required: ['text'],
};

async function registerTools(tab) {
  await tab.registerTool(
    { name: 'word_count', description: 'Counts the words of a text.', inputSchema: textInput, kind: 'read' },
    async ({ text }) => `${text.split(/\s+/).filter(Boolean).length} words`,
  );
  // A page's own tool through the W3C WebMCP API: the module provides `document.modelContext`
  // where the browser does not (a secure context: HTTPS or loopback). Each call of it waits for
  // the person's confirmation in this page.
  await document.modelContext.registerTool({
    name: 'shout',
    description: 'Returns the text in capitals.',
    inputSchema: textInput,
    execute: async ({ text }) => ({ content: [{ type: 'text', text: text.toUpperCase() }] }),
  });
}

// The tool list with a checkbox each; a change grants exactly the ticked tools.
async function showTools(tab) {
  const [tools, grants] = await Promise.all([tab.allTools(), tab.grants()]);
  $('tools').replaceChildren(...tools.map((tool) => {
    const box = Object.assign(document.createElement('input'), {
      type: 'checkbox', value: tool.name, checked: grants.tools.includes(tool.name),
    });
    const label = document.createElement('label');
    label.append(box, ` ${tool.name} `, Object.assign(document.createElement('small'), { textContent: tool.description }));
    const item = document.createElement('li');
    item.append(label);
    return item;
  }));
}

async function grantTicked(tab) {
  const tools = [...$('tools').querySelectorAll('input:checked')].map((box) => box.value);
  await tab.setGrants({ access: 'on', sources: [], tools });
  say(`Granted: ${tools.join(', ') || 'nothing'}.`);
}

async function startSession(tab) {
  $('start').disabled = true;
  const { pairingCode, fingerprint } = await tab.startSession(3600);
  $('pairing-code').textContent = pairingCode;
  $('fingerprint').textContent = fingerprint;
  $('pairing').hidden = false;
  say('Session started: waiting for the relay to see this tab…');
  tab.serve();
}

async function main() {
  const ownerToken = await signIn();
  const tab = await Sealpost.open({ ownerToken, relayOrigin, workspace: 'host-example' });
  let answered = 0;
  tab.on('ready', () => say('Serving: a paired MCP client can call the granted tools.'));
  tab.on('stopped', ({ reason }) => { say(`Stopped (${reason}).`); $('start').disabled = false; });
  tab.on('audit', ({ record }) => { if (record.call_id) $('calls').value = String(++answered); });
  tab.endOnPagehide();
  await registerTools(tab);
  await showTools(tab);
  $('tools').addEventListener('change', () => grantTicked(tab).catch((e) => say(e.message)));
  $('start').addEventListener('click', () => startSession(tab).catch((e) => { say(e.message); $('start').disabled = false; }));
  $('start').disabled = false;
  say('Signed in. Tick the tools an agent may use, then start a session.');
}

main().catch((error) => say(error.message));
