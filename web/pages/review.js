// Review: the changes an agent proposed, as a diff with a little context, to approve or reject.

import { focusNext, h, main, say, state, toolLabel, when } from '../ui.js';

// Unchanged lines more than this far from a change are folded away.
const DIFF_CONTEXT = 2;

// A line diff showing the changes with a little context: a one-line append to a long note is a
// few lines, not the whole note.
function diffLines(before, after) {
  // A final newline ends the last line; it does not start an empty one.
  const lines = (text) => (text ? text.replace(/\n$/, '').split('\n') : []);
  const a = lines(before); const b = lines(after);
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
export async function updateReviewCount() {
  const link = document.querySelector('nav a[href="#/review"]');
  if (!link || !state.tab) return;
  const waiting = (await state.tab.pendingProposals().catch(() => [])).length;
  link.textContent = waiting ? `Review (${waiting})` : 'Review';
  link.setAttribute('aria-label', waiting ? `Review, ${waiting} proposal${waiting === 1 ? '' : 's'} waiting` : 'Review');
}

export async function renderReview() {
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
      // As the executor appends: on a new line, keeping the final newline the body had.
      after = change.type === 'append_note'
        ? `${before}${before.endsWith('\n') || !before ? '' : '\n'}${change.text}${before.endsWith('\n') && !change.text.endsWith('\n') ? '\n' : ''}`
        : before.replace(change.find, change.replace);
    }
    items.push(h('article', { class: 'card', 'aria-label': what },
      h('h3', { text: what }),
      h('p', { class: 'muted', text: `Proposed by an AI agent at ${when(p.created_at_ms)}, with “${toolLabel(p.tool).replace(/ \(you review it\)$/, '')}”` }),
      h('div', { class: 'row' },
        h('button', { class: 'primary approve', onclick: async () => { try { await state.tab.applyProposal(p.id); say('Applied.'); } catch (e) { say(`Not applied: ${e.message}`, { error: true }); } reviewed(); } }, 'Approve'),
        h('button', { onclick: async () => { await state.tab.rejectProposal(p.id); say('Rejected.'); reviewed(); } }, 'Reject')),
      h('pre', { class: 'diff' }, diffLines(before, after))));
  }
  updateReviewCount();
  main.replaceChildren(h('h2', { text: 'Review' }),
    h('p', { class: 'muted', text: 'An AI agent can only propose changes. Nothing changes until you approve it here.' }),
    ...(items.length ? items : [h('p', { text: 'Nothing to review.' })]));
  focusNext();
}

// A proposal decided: the page is drawn anew, and focus goes to the next one waiting.
function reviewed() {
  state.focusNext = 'main .approve';
  renderReview();
}
