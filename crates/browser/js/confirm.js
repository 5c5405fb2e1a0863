// The person's confirmation of each call of a page's WebMCP tool, asked in the page.
//
// What it guards against is the agent: a call runs only after the person saw the tool, the page
// and every argument whole, and said yes (or chose "allow without asking" for that tool in this
// session). The agent chooses the arguments, so it could pad one to push another out of view:
// every argument's name is listed first with its size (short values in full), every value is
// shown whole below, and Allow is armed only once that list has been scrolled to its end;
// arguments too long to show a person in full are declined at once, saying so.
//
// It accepts only input the browser marks as the person's: an event whose `isTrusted` is true
// as read by the browser's own getter (taken from a real event when this module loads, so a
// plain object claiming `isTrusted: true` is refused even if page script got hold of a
// handler), with listeners added through the `addEventListener` this module found when it
// loaded; after an arming delay (a click aimed at something else a moment before the prompt
// appeared does not land on Allow), while the page is visible, and never in a frame (a page
// framing this one could cover the prompt).
//
// What it cannot hold against is script the page runs before this module loads: that script
// shares this realm, can replace any built-in the module reads (and the page serves the module
// itself), so it can answer the prompt; and any page script can call its own tools directly.
// docs/SECURITY.md ("Tools a page offers") says what this means.

// The browser's own `isTrusted` getter and `addEventListener`, as they are when this module
// loads: page script that patches either later does not reach the prompt's handlers.
const apply = Reflect.apply;
// `isTrusted` is unforgeable: an own accessor of every event, whose getter checks that it is
// called on a real event (a browser that kept it on the prototype would still have a getter).
const trustedGetter = Object.getOwnPropertyDescriptor(new Event('sealpost'), 'isTrusted')?.get
  ?? Object.getOwnPropertyDescriptor(Event.prototype, 'isTrusted')?.get;
const addEventListener = EventTarget.prototype.addEventListener;

// Whether `event` is an event the browser made from the person's input. The getter refuses
// anything that is not a real event (a plain object, or one made from Event.prototype).
function fromThePerson(event) {
  try {
    return apply(trustedGetter, event, []) === true;
  } catch {
    return false;
  }
}

function listen(target, type, handler) {
  apply(addEventListener, target, [type, handler]);
}

// How long the buttons stay disarmed after the prompt appears or the page becomes visible.
export const ARMING_DELAY_MS = 700;
// How long a call waits for the person: inside the module's 25 s budget for a host tool (itself
// inside the relay's 30 s lease), leaving the tool time to run once allowed.
export const CONFIRM_WITHIN_MS = 20_000;
// Most characters of arguments (as JSON) a person is asked to read before allowing a call;
// longer arguments are declined at once, so the agent can split the work.
export const MAX_CONFIRMED_ARGUMENT_CHARS = 20_000;
// A value this short (and on one line) is shown in the list of arguments itself.
const INLINE_VALUE_CHARS = 80;

// The person declined the call.
function declined(message) {
  return Object.assign(new Error(message), { code: 'declined' });
}

// The call did not get the person's confirmation: it lapsed, or they could not be asked.
function notConfirmed(message) {
  return Object.assign(new Error(message), { code: 'not_confirmed' });
}

const STYLE = `
  dialog { max-width: min(34rem, 92vw); border: 2px solid #1d4ed8; border-radius: 8px; padding: 1rem 1.25rem;
    font: 15px/1.45 system-ui, sans-serif; color: #111; background: #fff; }
  dialog::backdrop { background: rgb(0 0 0 / 0.35); }
  h2 { font-size: 1.05rem; margin: 0 0 0.5rem; }
  p { margin: 0.35rem 0; }
  dialog { max-height: 92vh; overflow: auto; }
  ul { margin: 0.25rem 0; padding-left: 1.25rem; }
  li { overflow-wrap: anywhere; }
  code { font-size: 13px; background: #f3f4f6; padding: 0 0.2rem; border-radius: 3px; }
  .values { max-height: 14rem; overflow: auto; background: #f3f4f6; padding: 0.5rem; border-radius: 4px; }
  h3 { font-size: 13px; margin: 0.5rem 0 0.15rem; }
  h3:first-child { margin-top: 0; }
  pre { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; font-size: 13px; }
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
    listen(document, 'visibilitychange', () => {
      if (document.visibilityState === 'visible') this.#arm(); else { this.#armedAt = Infinity; this.#showArmed(); }
    });
  }

  // Resolves when the person allows the call; rejects with `code: 'declined'` when they decline,
  // and with `code: 'not_confirmed'` when it lapses or they cannot be asked.
  confirm({ session, tool, description, args }) {
    if (!this.needed(session, tool)) return Promise.resolve();
    if (window.top !== window) {
      return Promise.reject(notConfirmed(`The page offering "${tool}" runs in a frame, where Sealpost cannot ask the person to confirm a call, so it did not run.`));
    }
    const length = JSON.stringify(args ?? {}).length;
    if (length > MAX_CONFIRMED_ARGUMENT_CHARS) {
      return Promise.reject(notConfirmed(`The arguments of this call of "${tool}" are ${length} characters as JSON, more than the ${MAX_CONFIRMED_ARGUMENT_CHARS} the Sealpost tab shows the person in full before they allow a call, so it did not run. Pass less in one call (split long text over several calls).`));
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
      waiting.reject(notConfirmed(`The person did not confirm this call of "${tool}" within ${Math.round(this.#withinMs / 1000)} s, so it did not run. Ask them to watch the tab, or to allow the tool without asking for this session.`));
    } else waiting.reject(notConfirmed(`This call of "${tool}" was not confirmed: ${why}.`));
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
    this.#showArmed();
    // A timer may fire a hair before `performance.now()` reaches the mark: allow for it.
    setTimeout(() => this.#showArmed(), ARMING_DELAY_MS + 20);
  }

  // Buttons look as they act: disabled while disarmed, Allow also until every argument was seen.
  #showArmed() {
    const armed = document.visibilityState === 'visible' && performance.now() >= this.#armedAt;
    const seen = this.#shown?.seenAll === true;
    for (const button of this.#host?.shadowRoot.querySelectorAll('button') ?? []) {
      button.disabled = !armed || (button.dataset.allows === 'yes' && !seen);
    }
  }

  // Only the person's own, deliberate input counts; an Allow only once every argument was seen.
  #accepts(event, waiting, choice) {
    return fromThePerson(event) && document.visibilityState === 'visible' && performance.now() >= this.#armedAt
      && (choice === 'declined' || waiting.seenAll === true);
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
    const { list, values } = this.#arguments(waiting.args, element);
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
      if (choice !== 'declined') node.dataset.allows = 'yes';
      listen(node, 'click', (event) => { if (this.#accepts(event, waiting, choice)) this.#settle(waiting, choice); });
      return node;
    };
    const unseen = element('p', { class: 'muted' }, 'Scroll through every argument to enable Allow.');
    const row = element('div', { class: 'row' });
    const decline = button('Decline', 'declined');
    row.append(button('Allow once', 'once', 'allow'), button('Allow without asking (this session)', 'always'), decline);
    dialog.append(
      element('h2', { id: 'sealpost-confirm-title' }, 'An AI agent wants to use a tool of this page'),
      element('p', {}, `Tool: ${waiting.tool}`),
      element('p', { class: 'muted' }, `Offered by the page at ${location.origin} (its own script, not Sealpost): “${waiting.description}”`),
      list,
      values,
      unseen,
      countdown,
      row,
    );
    // Escape does not dismiss it: the person answers with a button, or it lapses.
    listen(dialog, 'cancel', (event) => event.preventDefault());
    // A constructed stylesheet, not a <style> element: a page's CSP (style-src 'self') allows it.
    if (!root.adoptedStyleSheets.length) {
      const sheet = new CSSStyleSheet();
      sheet.replaceSync(STYLE);
      root.adoptedStyleSheets = [sheet];
    }
    root.replaceChildren(dialog);
    dialog.showModal();
    // Every value has been in view once the list was scrolled to its end (or fits as it is).
    const check = () => {
      if (waiting.seenAll || values.scrollTop + values.clientHeight < values.scrollHeight - 2) return;
      waiting.seenAll = true;
      unseen.remove();
      this.#showArmed();
    };
    listen(values, 'scroll', check);
    check();
    decline.focus();
    this.#arm();
  }

  // The arguments as the person reads them: a list naming every argument with its size (short
  // values in full), then every value whole, in one scrolling box.
  #arguments(args, element) {
    const entries = args !== null && typeof args === 'object' && !Array.isArray(args)
      ? Object.entries(args).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      : [['(arguments)', args]];
    const list = element('ul', { 'aria-label': 'Arguments' });
    const values = element('div', { class: 'values', tabindex: '0', 'aria-label': 'Every argument in full' });
    for (const [name, value] of entries) {
      const text = typeof value === 'string' ? value : JSON.stringify(value, null, 2) ?? String(value);
      const kind = typeof value === 'string' ? 'text' : Array.isArray(value) ? 'list' : value === null ? 'null' : typeof value;
      const item = element('li');
      item.append(element('code', {}, name), ` (${kind}, ${text.length} characters)`);
      if (text.length <= INLINE_VALUE_CHARS && !text.includes('\n')) item.append(': ', element('code', {}, typeof value === 'string' ? JSON.stringify(value) : text));
      list.append(item);
      values.append(element('h3', {}, name), element('pre', {}, text));
    }
    const intro = element('div');
    intro.append(element('p', {}, `With these ${entries.length} argument${entries.length === 1 ? '' : 's'}:`), list);
    return { list: intro, values };
  }
}
