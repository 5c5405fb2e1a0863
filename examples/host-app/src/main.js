// A host app on the @sealpost/browser package: it signs the person in, opens the module,
// registers two tools (one through the module, one through the W3C WebMCP API), lets the
// person grant them and starts a session whose pairing code an MCP client's plugin takes.

import { Sealpost } from '@sealpost/browser';
import './style.css';

const $ = (id) => document.getElementById(id);
const say = (text) => { $('status').textContent = text; };

// Where the sign-in is kept: this tab's sessionStorage, so a reload keeps it and closing the
// tab forgets it. A real app keeps it wherever it keeps its own secrets.
const KEPT = 'host-example-signin';

// The person's sign-in: from a one-time sign-in link (`sealpost-relay owner link NAME --app
// ORIGIN` prints `ORIGIN/#signin=CODE&relay=RELAY`), or the one this tab kept, renewed. The
// code leaves the address bar before it is used: it works once.
async function signIn() {
  const link = Sealpost.readSignInLink(location.hash);
  history.replaceState(null, '', location.pathname + location.search);
  if (link) {
    const relayOrigin = link.relayOrigin ?? location.origin;
    const signed = await Sealpost.signIn(link.code, relayOrigin);
    if (signed.appOrigin !== location.origin) {
      throw new Error(`This link signs in to ${signed.appOrigin ?? "the relay's own app"}, not this page.`);
    }
    return keep({ ...signed, relayOrigin });
  }
  const kept = JSON.parse(sessionStorage.getItem(KEPT) ?? 'null');
  if (!kept) throw new Error('Open this page from a sign-in link (sealpost-relay owner link NAME --app ' + location.origin + ').');
  return keep({ ...(await Sealpost.renew(kept.token, kept.relayOrigin)), relayOrigin: kept.relayOrigin });
}

function keep(signedIn) {
  const { token, expiresAt, relayOrigin, owner } = signedIn;
  sessionStorage.setItem(KEPT, JSON.stringify({ token, expiresAt, relayOrigin }));
  $('who').textContent = `${owner.name}, until ${new Date(expiresAt).toLocaleString()}`;
  return signedIn;
}

// A sign-in lapses a week after its last renewal: renew it twice a day while the page is open,
// and hand the new token to the open tab.
function renewEvery12h(tab, signedIn) {
  let current = signedIn;
  setInterval(async () => {
    try {
      current = keep({ ...(await Sealpost.renew(current.token, current.relayOrigin)), relayOrigin: current.relayOrigin });
      await tab.setOwnerToken(current.token);
    } catch (error) {
      say(`The sign-in could not be renewed: ${error.message}`);
    }
  }, 12 * 60 * 60 * 1000);
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
  // the person's confirmation in this page. Outside a secure context there is none.
  if (!document.modelContext) return;
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
  const signedIn = await signIn();
  const tab = await Sealpost.open({ ownerToken: signedIn.token, relayOrigin: signedIn.relayOrigin, workspace: 'host-example' });
  renewEvery12h(tab, signedIn);
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
