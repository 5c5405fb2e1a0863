// Workspace: sources and documents imported from files or folders, a document's editor, and
// the workspace's passphrase.

import { focusNext, h, main, plural, say, setChildren, state } from '../ui.js';
import { nextStep, stepsCard } from '../steps.js';
import { currentRoute } from '../app.js';

async function docId(source, path) {
  const bytes = new TextEncoder().encode(`${source}\u0000${path}`);
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return `d_${[...digest.slice(0, 12)].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
}

// A Markdown file's title is its first heading with words in it; a text file's is its name
// (a `# ` line in plain text is not a heading).
function titleOf(name, body) {
  const markdown = /\.(md|markdown)$/i.test(name);
  const heading = markdown ? body.match(/^#\s+(.*\w.*)$/m) : null;
  return (heading ? heading[1] : name.replace(/\.(md|markdown|txt|text)$/i, '')).trim().slice(0, 300) || name;
}

function passphraseCard() {
  const isSet = state.tab.restored.passphrase;
  const input = h('input', { type: 'password', id: 'new-passphrase', autocomplete: 'new-password', minlength: 8, 'aria-describedby': 'passphrase-help' });
  const change = async (passphrase) => {
    try {
      state.tab.restored.passphrase = await state.tab.setPassphrase(passphrase);
      say(state.tab.restored.passphrase ? 'A passphrase now protects this workspace. Keep it safe: without it the workspace cannot be opened.' : 'The passphrase is removed.');
      renderWorkspace();
    } catch (error) { say(error.message, { error: true }); }
  };
  return h('section', { class: 'card', 'aria-labelledby': 'passphrase-heading' },
    h('h3', { id: 'passphrase-heading', text: 'Passphrase' }),
    h('p', { id: 'passphrase-help', class: 'muted', text: isSet
      ? 'A passphrase protects this workspace: documents, proposals, activity and the pairing are sealed under a key made from it, and opening Sealpost asks for it.'
      : 'Optional. With a passphrase, documents, proposals, activity and the pairing are sealed under a key made from it (at least 8 characters), and opening Sealpost asks for it. Forgotten, it cannot be recovered.' }),
    h('form', { onsubmit: (event) => { event.preventDefault(); change(input.value); } },
      h('label', { for: 'new-passphrase' }, isSet ? 'New passphrase' : 'Passphrase'), ' ', input, ' ',
      h('button', { type: 'submit' }, isSet ? 'Change passphrase' : 'Set passphrase'),
      isSet ? h('button', { type: 'button', id: 'remove-passphrase', onclick: () => change(null) }, 'Remove passphrase') : null));
}

export async function renderWorkspace() {
  const sources = await state.tab.sources();
  const documents = await state.tab.documents();
  // The source of the last import, so the next folder lands in the same one.
  const sourceInput = h('input', { type: 'text', id: 'source-name', value: state.lastSource ?? sources[0] ?? 'notes', autocomplete: 'off' });
  const progress = h('progress', { id: 'import-progress', max: 1, value: 0, hidden: true, 'aria-label': 'Import progress' });
  const progressText = h('p', { id: 'import-status', role: 'status', 'aria-live': 'polite', text: state.importStatus ?? '' });
  const files = h('input', { type: 'file', id: 'pick-files', multiple: true, accept: '.md,.markdown,.txt,.text,text/*' });
  const folder = h('input', { type: 'file', id: 'pick-folder', webkitdirectory: true, multiple: true });
  const importFiles = async (list) => {
    const source = sourceInput.value.trim() || 'notes';
    const chosen = list.filter((f) => /\.(md|markdown|txt|text)$/i.test(f.name) || f.type.startsWith('text/'));
    if (!chosen.length) { progressText.textContent = 'No Markdown or text files were chosen: Sealpost imports .md and .txt files.'; return; }
    progress.hidden = false; progress.max = chosen.length; progress.value = 0;
    const batch = [];
    let done = 0;
    for (const file of chosen) {
      const path = file.relativePath || file.webkitRelativePath || file.name;
      const body = await file.text();
      batch.push({ id: await docId(source, path), source, title: titleOf(file.name, body), body, updated_at_ms: file.lastModified || Date.now() });
      if (batch.length === 100) { done += await state.tab.putDocuments(batch.splice(0)); progress.value = done; progressText.textContent = `Imported ${done} of ${chosen.length} files…`; }
    }
    if (batch.length) done += await state.tab.putDocuments(batch.splice(0));
    progress.value = done;
    state.importStatus = `Imported ${done} files into ${source}.`;
    state.lastSource = source;
    state.importedJustNow = true;
    state.focusNext = '#filter';
    // A person who went to another page meanwhile stays there; the status waits for them.
    if (currentRoute() === '#/workspace') renderWorkspace();
  };
  files.addEventListener('change', () => importFiles([...files.files]));
  folder.addEventListener('change', () => importFiles([...folder.files]));
  const drop = h('div', { class: 'drop', id: 'drop' }, 'Drop Markdown or text files, or whole folders, here.');
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', async (e) => {
    e.preventDefault(); drop.classList.remove('over');
    const collected = [];
    const walk = async (entry, prefix) => {
      if (entry.isFile) { const file = await new Promise((ok, fail) => entry.file(ok, fail)); file.relativePath = prefix + file.name; collected.push(file); }
      else if (entry.isDirectory) {
        const reader = entry.createReader();
        for (;;) { const batch = await new Promise((ok, fail) => reader.readEntries(ok, fail)); if (!batch.length) break; for (const child of batch) await walk(child, `${prefix}${entry.name}/`); }
      }
    };
    for (const item of [...e.dataTransfer.items]) { const entry = item.webkitGetAsEntry?.(); if (entry) await walk(entry, ''); }
    importFiles(collected);
  });
  const filter = h('input', { type: 'search', id: 'filter', placeholder: 'Filter by title', 'aria-label': 'Filter documents by title' });
  const rows = (needle) => documents
    .filter((d) => !needle || d.title.toLowerCase().includes(needle.toLowerCase()))
    .sort((a, b) => a.source.localeCompare(b.source) || a.title.localeCompare(b.title))
    .map((d) => h('tr', {}, h('td', {}, h('a', { href: '#/workspace', onclick: (e) => { e.preventDefault(); showDocument(d.id); } }, d.title)), h('td', { class: 'free', text: d.source }), h('td', { text: `${d.chars}` })));
  const body = h('tbody', {}, rows(''));
  filter.addEventListener('input', () => body.replaceChildren(...rows(filter.value)));
  // A new workspace says how to get going; once it has documents, the card goes.
  const firstSteps = documents.length ? null : await stepsCard('Getting started: three steps');
  // Right after an import, focus is on the documents' filter; the way on is the next Tab, not
  // one past every document.
  const next = state.importedJustNow ? await nextStep() : null;
  state.importedJustNow = false;
  const importNext = next && next.href !== '#/workspace'
    ? h('p', { id: 'import-next' }, h('strong', { text: 'Next: ' }), h('a', { href: next.href, text: next.text }))
    : null;
  setChildren(main,
    h('h2', { text: 'Workspace' }),
    h('p', { class: 'muted' }, 'Your documents live only in this browser. Nothing here leaves it unless you turn on AI access, and then only what you grant, sealed.'),
    firstSteps,
    h('section', { class: 'card', 'aria-labelledby': 'import-heading' },
      h('h3', { id: 'import-heading', text: 'Import' }),
      h('div', { class: 'row' }, h('label', { for: 'source-name' }, 'Into source'), sourceInput),
      h('div', { class: 'row' }, h('label', { for: 'pick-files' }, 'Files'), files),
      h('div', { class: 'row' }, h('label', { for: 'pick-folder' }, 'A folder'), folder),
      drop, progress, progressText),
    passphraseCard(),
    h('section', { 'aria-labelledby': 'docs-heading' },
      h('h3', { id: 'docs-heading', text: `Documents (${documents.length}) in ${plural(sources.length, 'source')}` }),
      documents.length ? [
        h('div', { class: 'row' }, filter), importNext,
        h('table', {}, h('thead', {}, h('tr', {}, h('th', { text: 'Title' }), h('th', { text: 'Source' }), h('th', { text: 'Characters' }))), body),
      ] : h('p', { class: 'muted', text: 'No documents yet: import some above.' })),
  );
  focusNext();
}

// A document opens to be read; editing is a step the person takes.
async function showDocument(id) {
  const doc = await state.tab.document(id);
  if (!doc) { say('That document is gone.'); return renderWorkspace(); }
  const edit = h('button', { class: 'primary', id: 'edit-document', onclick: () => editDocument(doc) }, 'Edit');
  main.replaceChildren(
    h('h2', { text: doc.title }),
    h('p', { class: 'muted', text: `In ${doc.source}, ${plural(doc.body.length, 'character')}` }),
    h('div', { class: 'row' }, edit, h('button', { onclick: () => renderWorkspace() }, 'Back')),
    h('pre', { class: 'document', id: 'document-text', text: doc.body }),
  );
  edit.focus();
}

function editDocument(doc) {
  const title = h('input', { type: 'text', id: 'doc-title', value: doc.title });
  const text = h('textarea', { id: 'doc-body' }); text.value = doc.body;
  main.replaceChildren(
    h('h2', { text: 'Edit document' }),
    h('p', { class: 'muted', text: `In ${doc.source}` }),
    h('div', { class: 'row' }, h('label', { for: 'doc-title' }, 'Title'), title),
    h('label', { for: 'doc-body' }, 'Text'), text,
    h('div', { class: 'row' },
      h('button', { class: 'primary', onclick: async () => { await state.tab.putDocuments([{ ...doc, title: title.value, body: text.value, updated_at_ms: Date.now() }]); say('Saved.'); showDocument(doc.id); } }, 'Save'),
      h('button', { onclick: async () => { if (confirm(`Delete “${doc.title}”?`)) { await state.tab.removeDocument(doc.id); say('Deleted.'); renderWorkspace(); } } }, 'Delete'),
      h('button', { onclick: () => showDocument(doc.id) }, 'Cancel')),
  );
  title.focus();
}
