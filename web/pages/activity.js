// Activity: every call the tab decided, and what became of its answer.

import { h, main, setChildren, state, toolLabel, when } from '../ui.js';

// A call's outcome as Activity shows it: what the tab decided, unless the relay never took the
// answer, in which case the agent never got it and that is what happened.
export function outcomeOf(record) {
  return record.delivery?.type === 'not_delivered' ? 'not_delivered' : (record.outcome?.type ?? 'unknown');
}

function outcomeText(record) {
  const o = record.outcome ?? {};
  // An error the tool itself answered (no such document, say) is an answer, not a refusal.
  const type = o.type === 'answered_with_error' ? 'answered: the tool reported an error' : (o.type ?? 'unknown').replaceAll('_', ' ');
  const decided = type + (o.code ? ` (${o.code.replaceAll('_', ' ')})` : '') + (o.reason ? ` (${o.reason})` : '');
  return record.delivery?.type === 'not_delivered' ? `not delivered: ${record.delivery.why} (the tab had ${decided})` : decided;
}

export async function renderActivity() {
  const { entries, unreadable } = await state.tab.auditLog();
  const tools = [...new Set(entries.map((e) => e.tool).filter(Boolean))].sort();
  const outcomes = [...new Set(entries.map(outcomeOf))].sort();
  const toolFilter = h('select', { id: 'filter-tool' }, h('option', { value: '' }, 'All tools'), tools.map((t) => h('option', { value: t }, toolLabel(t))));
  const outcomeFilter = h('select', { id: 'filter-outcome' }, h('option', { value: '' }, 'All outcomes'), outcomes.map((o) => h('option', { value: o }, o.replaceAll('_', ' '))));
  const body = h('tbody');
  const fill = () => body.replaceChildren(...entries
    .filter((e) => (!toolFilter.value || e.tool === toolFilter.value) && (!outcomeFilter.value || outcomeOf(e) === outcomeFilter.value))
    .map((e) => h('tr', {}, h('td', { text: when(e.at_ms) }), h('td', { class: 'free', text: e.tool ? toolLabel(e.tool) : '—' }), h('td', { text: outcomeText(e) }), h('td', { text: e.reply_bytes ? `${e.reply_bytes.toLocaleString()} bytes` : '—' }))));
  toolFilter.addEventListener('change', fill); outcomeFilter.addEventListener('change', fill);
  fill();
  setChildren(main, h('h2', { text: 'Activity' }),
    h('p', { class: 'muted', text: 'Every call and review, kept encrypted in this browser. Arguments are kept only as a digest.' }),
    h('div', { class: 'row' }, h('label', { for: 'filter-tool' }, 'Tool'), toolFilter, h('label', { for: 'filter-outcome' }, 'Outcome'), outcomeFilter),
    unreadable ? h('p', { class: 'bad', text: `${unreadable} entries could not be read and are not shown.` }) : null,
    h('table', {}, h('thead', {}, h('tr', {}, h('th', { text: 'When' }), h('th', { text: 'Tool' }), h('th', { text: 'Outcome' }), h('th', { text: 'Answer size' }))), body));
}
