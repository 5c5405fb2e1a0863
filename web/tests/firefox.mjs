// Firefox for the specs: Debian's Firefox ESR driven over WebDriver BiDi by puppeteer-core,
// behind the few calls of playwright-core's Browser, BrowserContext and Page that the specs
// use, so one spec runs in either browser (`launch(name)`). Playwright's own Firefox needs a
// patched build; the stock one speaks BiDi.
//
// Selectors are Playwright's as the specs write them: CSS, with `:text-is("…")` (whole text),
// `:not(:text-is("…"))` or `:text("…")` (part of it) ending a compound, matched through open
// shadow roots.

import { existsSync } from 'node:fs';
import puppeteer from 'puppeteer-core';

export const FIREFOX = process.env.SEALPOST_FIREFOX ?? '/usr/bin/firefox-esr';

// The browser itself must be there: a spec that cannot start it fails, it never passes by
// leaving Firefox out.
export async function launchFirefox({ prefs = {} } = {}) {
  if (!existsSync(FIREFOX)) throw new Error(`Firefox is not installed at ${FIREFOX}: apt-get install -y firefox-esr`);
  const browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: FIREFOX,
    headless: true,
    extraPrefsFirefox: { 'browser.shell.checkDefaultBrowser': false, ...prefs },
  });
  return new FirefoxBrowser(browser);
}

class FirefoxBrowser {
  constructor(browser) { this.browser = browser; this.name = 'firefox'; }
  async version() { return await this.browser.version(); }
  async newContext() { return new FirefoxContext(await this.browser.createBrowserContext()); }
  async close() { await this.browser.close(); }
}

class FirefoxContext {
  constructor(context) { this.context = context; }
  async newPage() { return new FirefoxPage(await this.context.newPage()); }
  async close() { await this.context.close(); }
}

// Runs in the page: the elements a selector names, through open shadow roots.
function deepFind(selector, all) {
  const parts = [];
  let part = '';
  let quote = null;
  let depth = 0;
  for (const char of selector.trim()) {
    if (quote) { if (char === quote) quote = null; part += char; continue; }
    if (char === '"' || char === "'") quote = char;
    if (char === '(' || char === '[') depth += 1;
    if (char === ')' || char === ']') depth -= 1;
    if (char === ' ' && depth === 0) { if (part) parts.push(part); part = ''; continue; }
    part += char;
  }
  if (part) parts.push(part);
  const within = (root, css) => {
    const found = [...root.querySelectorAll(css)];
    for (const element of root.querySelectorAll('*')) if (element.shadowRoot) found.push(...within(element.shadowRoot, css));
    return found;
  };
  let scopes = [document];
  for (const [index, compound] of parts.entries()) {
    const not = compound.match(/^(.*?):not\(:text-is\((["'])(.*)\2\)\)$/);
    const text = not ? null : compound.match(/^(.*?):text(-is)?\((["'])(.*)\3\)$/);
    const css = not ? (not[1] || '*') : text ? (text[1] || '*') : compound;
    const shown = (element) => element.textContent.replace(/\s+/g, ' ').trim();
    let found = scopes.flatMap((scope) => within(scope, css));
    if (not) found = found.filter((element) => shown(element) !== not[3]);
    if (text) found = found.filter((element) => (text[2] ? shown(element) === text[4] : shown(element).includes(text[4])));
    if (index === parts.length - 1) {
      const visible = found.filter((element) => element.checkVisibility());
      return all ? found : (visible[0] ?? found[0] ?? null);
    }
    scopes = found.flatMap((element) => [element, ...(element.shadowRoot ? [element.shadowRoot] : [])]);
  }
  return all ? [] : null;
}

class FirefoxPage {
  constructor(page) {
    this.page = page;
    this.listeners = { pageerror: [], console: [], request: [] };
    page.on('pageerror', (error) => { for (const listener of this.listeners.pageerror) listener(error); });
    page.on('console', (message) => { for (const listener of this.listeners.console) listener(message); });
    page.on('request', (request) => { for (const listener of this.listeners.request) listener(request); });
  }

  on(type, listener) { this.listeners[type]?.push(listener); }
  url() { return this.page.url(); }
  isClosed() { return this.page.isClosed(); }
  async goto(url) { await this.page.goto(url); }
  async reload() { await this.page.reload(); }
  async close() { await this.page.close(); }
  async screenshot({ path }) { await this.page.screenshot({ path }); }

  // `init`: a function, or `{ content }` (script text), run before any of the page's scripts.
  async addInitScript(init) {
    await this.page.evaluateOnNewDocument(typeof init === 'function' ? init : new Function(init.content));
  }

  async evaluate(fn, arg) {
    return typeof fn === 'string' ? await this.page.evaluate(fn) : await this.page.evaluate(fn, arg);
  }

  // Polls from here, as Playwright does: puppeteer's own waiting makes a function from text in
  // the page, which the relay's CSP forbids.
  async waitForFunction(fn, arg, { timeout = 30_000 } = {}) {
    const deadline = Date.now() + timeout;
    for (;;) {
      const value = typeof fn === 'string' ? await this.page.evaluate(fn) : await this.page.evaluate(fn, arg);
      if (value) return value;
      if (Date.now() > deadline) throw new Error(`waitForFunction: not true within ${timeout} ms: ${String(fn).slice(0, 200)}`);
      await new Promise((ok) => setTimeout(ok, 100));
    }
  }

  async #handle(selector) {
    const handle = await this.page.evaluateHandle(deepFind, selector, false);
    const element = handle.asElement();
    if (!element) { await handle.dispose(); return null; }
    return element;
  }

  async $(selector) { return await this.#handle(selector); }

  async $$(selector) {
    const list = await this.page.evaluateHandle(deepFind, selector, true);
    const properties = await list.getProperties();
    await list.dispose();
    return [...properties.values()].map((handle) => handle.asElement()).filter(Boolean).map((element) => new FirefoxElement(element));
  }

  // The search as an expression: the driver evaluates it outside the page's CSP, which may
  // forbid the page itself to make a function from text.
  static #found(selector, test) {
    return `((element) => ${test})((${deepFind})(${JSON.stringify(selector)}, false))`;
  }

  async waitForSelector(selector, { timeout = 30_000, state = 'visible' } = {}) {
    const test = {
      detached: 'element === null',
      hidden: 'element === null || !element.checkVisibility()',
      attached: 'element !== null',
      visible: 'element !== null && element.checkVisibility()',
    }[state];
    await this.waitForFunction(FirefoxPage.#found(selector, test), undefined, { timeout });
    return state === 'visible' || state === 'attached' ? await this.$(selector) : null;
  }

  async isVisible(selector) {
    return await this.page.evaluate(FirefoxPage.#found(selector, 'element !== null && element.checkVisibility()'));
  }

  async textContent(selector) {
    const element = await this.waitForSelector(selector, { state: 'attached' });
    return await element.evaluate((e) => e.textContent);
  }

  // A trusted click at the element's centre, as a person's.
  async click(selector) {
    const element = await this.waitForSelector(selector);
    // As Playwright does, only once the control is enabled.
    for (let i = 0; i < 300 && await element.evaluate((e) => e.disabled); i += 1) await new Promise((ok) => setTimeout(ok, 100));
    await element.click();
  }

  async check(selector) {
    const element = await this.waitForSelector(selector);
    if (!(await element.evaluate((e) => e.checked))) await element.click();
  }

  async fill(selector, value) {
    const element = await this.waitForSelector(selector);
    await element.evaluate((e) => { e.value = ''; });
    await element.type(value);
  }

  async setInputFiles(selector, paths) {
    const element = await this.waitForSelector(selector, { state: 'attached' });
    await element.uploadFile(...[paths].flat());
  }
}

class FirefoxElement {
  constructor(element) { this.element = element; }
  async check() { if (!(await this.element.evaluate((e) => e.checked))) await this.element.click(); }
  async click() { await this.element.click(); }
  async boundingBox() { return await this.element.boundingBox(); }
}
