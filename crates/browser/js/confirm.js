// The person's confirmation of each call of a page's WebMCP tool, asked in the page.
//
// What it guards against is the agent: a call runs only after the person saw the tool, the page
// and the arguments and said yes (or chose "allow without asking" for that tool in this
// session). It accepts only the person's own input: a trusted event (`isTrusted`, which page
// script cannot forge with `click()` or `dispatchEvent`), after an arming delay (a click aimed
// at something else a moment before the prompt appeared does not land on Allow), while the page
// is visible, and never in a frame (a page framing this one could cover the prompt). What it
// cannot guard against is script the page itself runs: that script can call its own tools
// directly. docs/SECURITY.md says so.

// How long the buttons stay disarmed after the prompt appears or the page becomes visible.
export const ARMING_DELAY_MS = 700;
// How long a call waits for the person: inside the module's 25 s budget for a host tool (itself
// inside the relay's 30 s lease), leaving the tool time to run once allowed.
export const CONFIRM_WITHIN_MS = 20_000;
// Most characters of the arguments shown; the rest is summarised by its length.
const SHOWN_ARGUMENT_CHARS = 4000;

function declined(message) {
  return Object.assign(new Error(message), { code: 'declined' });
}

const STYLE = `
  dialog { max-width: min(34rem, 92vw); border: 2px solid #1d4ed8; border-radius: 8px; padding: 1rem 1.25rem;
    font: 15px/1.45 system-ui, sans-serif; color: #111; background: #fff; }
  dialog::backdrop { background: rgb(0 0 0 / 0.35); }
  h2 { font-size: 1.05rem; margin: 0 0 0.5rem; }
  p { margin: 0.35rem 0; }
  pre { max-height: 14rem; overflow: auto; background: #f3f4f6; padding: 0.5rem; border-radius: 4px;
    white-space: pre-wrap; word-break: break-word; font-size: 13px; }
  .muted { color: #555; font-size: 13px; }
  .row { display: flex; gap: 0.5rem; flex-wrap: wrap; margin-top: 0.75rem; }
  button { font: inherit; padding: 0.4rem 0.8rem; border-radius: 6px; border: 1px solid #888; background: #f9fafb; cursor: pointer; }
  button.allow { background: #1d4ed8; color: #fff; border-color: #1d4ed8; }
  button:disabled { opacity: 0.5; cursor: not-allowed; }
`;

export class Confirmations {
  #queue = [];
  #shown = null;
  #armedAt = Infinity;
  #allowed = new Set();
  #session = null;
  #host = null;
  #withinMs;

  // `withinMs` may shorten the wait (never lengthen it: the call's time is fixed).
  constructor({ withinMs = CONFIRM_WITHIN_MS } = {}) {
    this.#withinMs = Math.min(withinMs, CONFIRM_WITHIN_MS);
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'visible') this.#arm(); else this.#armedAt = Infinity;
    });
  }

  // Resolves when the person allows the call; rejects with `code: 'declined'` when they decline,
  // when it lapses, or when they cannot be asked.
  confirm({ session, tool, description, args }) {
    if (!this.needed(session, tool)) return Promise.resolve();
    if (window.top !== window) {
      return Promise.reject(declined(`The page offering "${tool}" runs in a frame, where Sealpost cannot ask the person to confirm a call, so it did not run.`));
    }
    return new Promise((resolve, reject) => {
      const waiting = { tool, description, args, resolve, reject };
      waiting.timer = setTimeout(() => this.#settle(waiting, 'lapsed'), this.#withinMs);
      this.#queue.push(waiting);
      if (!this.#shown) this.#showNext();
    });
  }

  // Whether a call of `tool` in `session` waits for the person (not when they allowed the tool
  // without asking in this session).
  needed(session, tool) {
    if (session !== this.#session) { this.#session = session; this.#allowed.clear(); }
    return !this.#allowed.has(tool);
  }

  // A tool registered again (other text or schema) is asked about afresh.
  forget(tool) { this.#allowed.delete(tool); }

  // Declines every waiting call (the session ended, the tab closed).
  declineAll(why) {
    for (const waiting of [...this.#queue]) this.#settle(waiting, 'ended', why);
  }

  #settle(waiting, choice, why) {
    const at = this.#queue.indexOf(waiting);
    if (at < 0) return;
    this.#queue.splice(at, 1);
    clearTimeout(waiting.timer);
    const { tool } = waiting;
    if (choice === 'always') this.#allowed.add(tool);
    if (choice === 'once' || choice === 'always') waiting.resolve();
    else if (choice === 'declined') waiting.reject(declined(`The person declined this call of "${tool}" in the Sealpost tab.`));
    else if (choice === 'lapsed') {
      waiting.reject(declined(`The person did not confirm this call of "${tool}" within ${Math.round(this.#withinMs / 1000)} s, so it did not run. Ask them to watch the tab, or to allow the tool without asking for this session.`));
    } else waiting.reject(declined(`This call of "${tool}" was not confirmed: ${why}.`));
    // Other calls of a tool just allowed for the session need no prompt either.
    if (choice === 'always') for (const other of this.#queue.filter((w) => w.tool === tool)) this.#settle(other, 'once');
    if (this.#shown === waiting) { this.#shown = null; this.#showNext(); }
  }

  #showNext() {
    const waiting = this.#queue[0];
    if (!waiting) { this.#host?.remove(); this.#host = null; return; }
    this.#shown = waiting;
    this.#render(waiting);
  }

  #arm() {
    this.#armedAt = performance.now() + ARMING_DELAY_MS;
    const buttons = this.#host?.shadowRoot.querySelectorAll('button') ?? [];
    for (const button of buttons) button.disabled = true;
    setTimeout(() => { if (document.visibilityState === 'visible') for (const button of buttons) button.disabled = false; }, ARMING_DELAY_MS);
  }

  // Only the person's own, deliberate input counts.
  #accepts(event) {
    return event.isTrusted && document.visibilityState === 'visible' && performance.now() >= this.#armedAt;
  }

  #render(waiting) {
    if (!this.#host) {
      this.#host = document.createElement('div');
      this.#host.setAttribute('data-sealpost-confirm', '');
      this.#host.attachShadow({ mode: 'open' });
      document.body.append(this.#host);
    }
    const root = this.#host.shadowRoot;
    const element = (tag, attributes = {}, text) => {
      const node = document.createElement(tag);
      for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
      if (text !== undefined) node.textContent = text;
      return node;
    };
    let shown = JSON.stringify(waiting.args ?? {}, null, 2);
    if (shown.length > SHOWN_ARGUMENT_CHARS) shown = `${shown.slice(0, SHOWN_ARGUMENT_CHARS)}\n… (${shown.length} characters in all)`;
    const dialog = element('dialog', { 'aria-labelledby': 'sealpost-confirm-title', role: 'alertdialog' });
    const countdown = element('p', { class: 'muted' });
    const started = Date.now();
    const tick = () => {
      const left = Math.max(0, Math.ceil((this.#withinMs - (Date.now() - started)) / 1000));
      countdown.textContent = `Unanswered, the call is declined in ${left} s.${this.#queue.length > 1 ? ` ${this.#queue.length - 1} more waiting.` : ''}`;
    };
    tick();
    const ticker = setInterval(() => { if (this.#shown !== waiting) clearInterval(ticker); else tick(); }, 1000);
    const button = (label, choice, className) => {
      const node = element('button', { type: 'button', ...(className ? { class: className } : {}) }, label);
      node.addEventListener('click', (event) => { if (this.#accepts(event)) this.#settle(waiting, choice); });
      return node;
    };
    const row = element('div', { class: 'row' });
    const decline = button('Decline', 'declined');
    row.append(button('Allow once', 'once', 'allow'), button('Allow without asking (this session)', 'always'), decline);
    dialog.append(
      element('h2', { id: 'sealpost-confirm-title' }, 'An AI agent wants to use a tool of this page'),
      element('p', {}, `Tool: ${waiting.tool}`),
      element('p', { class: 'muted' }, `Offered by the page at ${location.origin} (its own script, not Sealpost): “${waiting.description}”`),
      element('p', {}, 'With these arguments:'),
      element('pre', {}, shown),
      countdown,
      row,
    );
    // Escape does not dismiss it: the person answers with a button, or it lapses.
    dialog.addEventListener('cancel', (event) => event.preventDefault());
    // A constructed stylesheet, not a <style> element: a page's CSP (style-src 'self') allows it.
    if (!root.adoptedStyleSheets.length) {
      const sheet = new CSSStyleSheet();
      sheet.replaceSync(STYLE);
      root.adoptedStyleSheets = [sheet];
    }
    root.replaceChildren(dialog);
    dialog.showModal();
    decline.focus();
    this.#arm();
  }
}
