// The way from a new workspace to an agent's first answer: three steps, each done or not, in
// order. Workspace shows them while the workspace is new; AI access shows what is left.

import { h, state } from './ui.js';

async function steps() {
  const [documents, grants, session] = await Promise.all([state.tab.documents(), state.tab.grants(), state.tab.session()]);
  return [
    { text: 'Import your notes: Markdown or text files, or whole folders.', href: '#/workspace', done: documents.length > 0 },
    { text: 'Choose what an AI agent may use: switch AI access on, tick its tools and the sources it may read.', href: '#/access', done: grants.access === 'on' && grants.tools.length > 0 },
    { text: 'Start a session, then pair your MCP client once with the code it shows (sealpost pair).', href: '#/access', done: !!session && !!state.pluginSeen },
  ];
}

// The first step not yet done, or none.
export async function nextStep() {
  return (await steps()).find((step) => !step.done) ?? null;
}

// The steps as a card, the next one marked and linked; nothing once all are done.
export async function stepsCard(heading) {
  const list = await steps();
  const next = list.find((step) => !step.done);
  if (!next) return null;
  const here = location.hash || '#/workspace';
  return h('section', { class: 'card', id: 'first-steps', 'aria-labelledby': 'steps-heading' },
    h('h3', { id: 'steps-heading', text: heading }),
    h('ol', {}, list.map((step) => h('li', { class: step.done ? 'muted' : null },
      step.done ? '✓ ' : '',
      step === next ? h('strong', { text: 'Next: ' }) : '',
      step === next && step.href !== here ? h('a', { href: step.href, text: step.text }) : step.text,
      step.done ? ' (done)' : ''))));
}

// Redraws the card in place (or takes it away) after a step may have been done.
export async function refreshStepsCard(heading) {
  const shown = document.getElementById('first-steps');
  if (!shown) return;
  const card = await stepsCard(heading);
  if (card) shown.replaceWith(card); else shown.remove();
}
