// Tools a page offers through the W3C WebMCP API (`document.modelContext`, the draft of
// 27 May 2026), served to the paired agent through Sealpost.
//
// Sealpost is a consumer of that API, like an agent built into the browser: it lists the page's
// tools with `getTools()`, follows `toolchange`, and runs a call with `executeTool()`. So one
// bridge serves Chromium's own implementation, `@mcp-b/webmcp-polyfill`, `@mcp-b/global` (which
// mirrors its tools into the context underneath) and, when a page has none of them, the small
// conforming context below that this module installs when it loads. A browser context a consumer
// cannot read (Chromium 148's `navigator.modelContext`: `registerTool` alone, withdrawn through
// a signal; Firefox's, behind `dom.modelcontext.enabled`: `registerTool` and `unregisterTool`,
// an earlier draft's) gets that context in front of it, which hands each registration, and each
// withdrawal, on to the browser's as well.
//
// Nothing here decides what the agent may do: every tool is off until the person grants it (the
// grant bound to the tool's name, description, schema and annotations), and every call waits for
// the person's confirmation (confirm.js).

// Draft rules for a name (1–128 of [A-Za-z0-9_.-]); Sealpost's own, stricter rules are the
// executor's, checked when the tool reaches a tab.
const DRAFT_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

let own = null;

// Sealpost's context: `registerTool(tool, {signal})`, withdrawn by aborting the signal (the
// draft's way) or by `unregisterTool(name)` (earlier drafts' way, kept for pages written then);
// `getTools()`, `executeTool(tool, inputJson, {signal})` and `toolchange` for consumers.
class SealpostModelContext extends EventTarget {
  #tools = new Map();
  #ontoolchange = null;
  // Set while a tab bridges this context: registration then waits for the tab's verdict, so a
  // name Sealpost refuses is refused to the page's own `registerTool` call.
  admit = null;
  // The browser's own context this one stands in front of, if any: it gets every tool too, so
  // the browser's agent sees what the page offers.
  native = null;

  constructor(native = null) {
    super();
    this.native = native;
  }

  get ontoolchange() { return this.#ontoolchange; }
  set ontoolchange(handler) {
    if (this.#ontoolchange) this.removeEventListener('toolchange', this.#ontoolchange);
    this.#ontoolchange = typeof handler === 'function' ? handler : null;
    if (this.#ontoolchange) this.addEventListener('toolchange', this.#ontoolchange);
  }

  async registerTool(tool, { signal } = {}) {
    if (!tool || typeof tool !== 'object') throw new TypeError('registerTool(tool) needs a tool object');
    const { name, title, description, inputSchema, annotations, execute } = tool;
    if (typeof name !== 'string' || !DRAFT_NAME.test(name)) {
      throw new DOMException('A tool name is 1–128 ASCII letters, digits, "_", "-" or "."', 'InvalidStateError');
    }
    if (typeof description !== 'string' || !description) throw new DOMException('A tool needs a description', 'InvalidStateError');
    if (typeof execute !== 'function') throw new TypeError('A tool needs an execute function');
    if (this.#tools.has(name)) throw new DOMException(`A tool named "${name}" is already registered`, 'InvalidStateError');
    signal?.throwIfAborted();
    const mirror = new AbortController();
    const entry = {
      name, description, execute, mirror,
      ...(title === undefined ? {} : { title: String(title) }),
      ...(inputSchema === undefined ? {} : { inputSchema: JSON.parse(JSON.stringify(inputSchema)) }),
      ...(annotations === undefined ? {} : { annotations: { ...annotations } }),
    };
    if (this.native) await this.native.registerTool(tool, { signal: mirror.signal });
    try {
      if (this.admit) await this.admit(this.#described(entry));
    } catch (error) {
      this.#withdrawNative(name, mirror);
      throw error;
    }
    this.#tools.set(name, entry);
    signal?.addEventListener('abort', () => this.#remove(name, entry), { once: true });
    this.#changed();
  }

  unregisterTool(name) { this.#remove(name, this.#tools.get(name)); }

  async getTools() {
    return [...this.#tools.values()].map((entry) => this.#described(entry)).sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  async executeTool(tool, inputJson, { signal } = {}) {
    signal?.throwIfAborted();
    const entry = this.#tools.get(tool?.name);
    if (!entry) throw new DOMException(`Tool not found: ${tool?.name}`, 'UnknownError');
    // Chromium's implementation takes the arguments as an object, the polyfill as JSON text.
    const input = typeof inputJson === 'string' ? JSON.parse(inputJson) : (inputJson ?? {});
    const result = await entry.execute(input);
    if (typeof result === 'string') return result;
    return JSON.stringify(result) ?? 'Operation succeeded';
  }

  #described({ name, title, description, inputSchema, annotations }) {
    return { name, title: title ?? '', description, inputSchema, annotations, origin: location.origin, window };
  }

  #remove(name, entry) {
    if (entry && this.#tools.get(name) === entry) { this.#tools.delete(name); this.#withdrawNative(name, entry.mirror); this.#changed(); }
  }

  // The browser's context forgets the tool too, whichever way its draft withdraws one: the
  // signal (Chromium) or `unregisterTool(name)` (Firefox, which takes no signal). Else its own
  // agent could still run a withdrawn tool, and the page could not register the name again.
  #withdrawNative(name, mirror) {
    mirror.abort();
    if (typeof this.native?.unregisterTool !== 'function') return;
    try {
      Promise.resolve(this.native.unregisterTool(name)).catch(() => {});
    } catch {
      // Already gone: the signal withdrew it.
    }
  }

  #changed() { queueMicrotask(() => this.dispatchEvent(new Event('toolchange'))); }
}

// Installs Sealpost's context where the page has none (and the page is a secure context, as the
// draft requires). A polyfill loaded later then finds it and stands aside; `@mcp-b/global`
// wraps it and mirrors its tools into it. A context already there that offers no consumer side
// (no `getTools`/`executeTool`) keeps its tools from every agent but the browser's, so
// Sealpost's goes in front of it, at both places the drafts name.
export function installModelContext() {
  if (typeof document === 'undefined' || !globalThis.isSecureContext) return null;
  const present = document.modelContext ?? navigator.modelContext ?? null;
  if (present && (readable(present) || typeof present.registerTool !== 'function')) return null;
  own = new SealpostModelContext(present);
  Object.defineProperty(document, 'modelContext', { configurable: true, enumerable: true, get: () => own });
  Object.defineProperty(navigator, 'modelContext', { configurable: true, enumerable: true, get: () => own });
  return own;
}

// Whether a consumer can list and run a context's tools (the current draft's consumer side).
function readable(context) {
  return typeof context?.getTools === 'function' && typeof context?.executeTool === 'function';
}

// The context whose tools the person sees: Sealpost's own when it installed one (a wrapper put
// in front of it later mirrors into it), else the page's when Sealpost can read it. Otherwise
// `{ context: null, problem }`: why the page's tools cannot be offered, for the host to hear.
export function pageModelContext() {
  if (own) return { context: own };
  const present = document.modelContext ?? navigator.modelContext ?? null;
  if (readable(present)) return { context: present };
  if (!globalThis.isSecureContext) {
    return { context: null, problem: 'WebMCP needs a secure context (HTTPS, or loopback): this page is not one, so the page offers no tools through it' };
  }
  if (present) {
    return { context: null, problem: 'the page\'s WebMCP context offers no way to list and run its tools (no getTools or executeTool), and Sealpost could not stand in front of it: its tools are not offered' };
  }
  return { context: null };
}

// What the executor needs of a page tool; `key` changes whenever what a grant is bound to does.
function specOf(tool) {
  const hints = { ...(tool.annotations ?? {}), ...(tool.title ? { title: tool.title } : {}) };
  const annotations = Object.keys(hints).length ? hints : undefined;
  const spec = {
    name: tool.name,
    description: tool.description,
    inputSchema: tool.inputSchema && typeof tool.inputSchema === 'object' ? tool.inputSchema : { type: 'object' },
    kind: 'read',
    fromPage: true,
    ...(annotations ? { annotations } : {}),
  };
  return { spec, key: JSON.stringify(spec) };
}

// Reads what `executeTool` returned (a string; JSON when the tool returned an object) as the
// module's tool result: an MCP `CallToolResult` keeps its text and `isError`, anything else is
// the text.
export function resultOf(returned) {
  let parsed;
  try { parsed = JSON.parse(returned); } catch { return { text: String(returned) }; }
  if (parsed && typeof parsed === 'object' && Array.isArray(parsed.content)) {
    const text = parsed.content.filter((part) => part?.type === 'text').map((part) => part.text).join('\n');
    const structured = parsed.structuredContent ?? undefined;
    return { text: text || (structured ? JSON.stringify(structured) : ''), ...(structured ? { structured } : {}), isError: parsed.isError === true };
  }
  return { text: typeof parsed === 'string' ? parsed : String(returned) };
}

// Keeps a tab's host tools in step with a page's WebMCP tools.
export class WebMcpBridge {
  #context;
  #tab;
  #bridged = new Map(); // name → { tool, key }
  #refused = new Set(); // keys already reported, so a refusal is said once
  #syncing = Promise.resolve();
  #listener = () => { this.sync(); };

  constructor(context, tab) {
    this.#context = context;
    this.#tab = tab;
  }

  async start() {
    this.#context.addEventListener?.('toolchange', this.#listener);
    if (this.#context === own) own.admit = (tool) => this.#admit(tool);
    await this.sync();
  }

  stop() {
    this.#context.removeEventListener?.('toolchange', this.#listener);
    if (this.#context === own) own.admit = null;
  }

  has(name) { return this.#bridged.has(name); }

  // Follows the page's list: new tools registered, withdrawn ones removed, a tool whose text,
  // schema or hints changed registered afresh (its grant, bound to the old one, does not carry).
  sync() {
    this.#syncing = this.#syncing.then(() => this.#sync()).catch((error) => {
      this.#tab.warn(`the page's WebMCP tools could not be read: ${error?.message ?? error}`);
    });
    return this.#syncing;
  }

  async #sync() {
    const tools = await this.#context.getTools();
    const seen = new Set();
    for (const tool of tools) {
      seen.add(tool.name);
      const { spec, key } = specOf(tool);
      const bridged = this.#bridged.get(tool.name);
      if (bridged?.key === key) { bridged.tool = tool; continue; }
      if (bridged) await this.#withdraw(tool.name);
      try {
        await this.#tab.call('registerTool', spec);
        this.#bridged.set(tool.name, { tool, key });
      } catch (error) {
        if (!this.#refused.has(key)) this.#refuse(tool.name, error, key);
      }
    }
    for (const name of [...this.#bridged.keys()]) if (!seen.has(name)) await this.#withdraw(name);
  }

  // A registration through Sealpost's own context, checked by the tab before it is accepted.
  async #admit(tool) {
    const { spec, key } = specOf(tool);
    await this.#syncing;
    await this.#tab.call('registerTool', spec);
    this.#bridged.set(tool.name, { tool, key });
  }

  #refuse(name, error, key) {
    this.#refused.add(key);
    const message = `Sealpost does not offer the page's tool "${name}": ${error?.message ?? error}`;
    console.error(message);
    this.#tab.dispatch({ type: 'tool_refused', name, message });
  }

  async #withdraw(name) {
    this.#bridged.delete(name);
    // Whatever the person allowed for the old tool does not carry to a new one of that name.
    this.#tab.confirmations?.forget(name);
    await this.#tab.call('unregisterTool', name).catch(() => {});
  }

  async execute(name, args) {
    const bridged = this.#bridged.get(name);
    if (!bridged) throw new Error(`the page withdrew the tool ${name}`);
    // Chromium 156 takes the arguments as an object; @mcp-b/webmcp-polyfill 5.1 (and a wrapper
    // in front of it) as JSON text. Sealpost's own context takes either.
    const polyfill = this.#context.__isWebMCPPolyfill || this.#context.native?.__isWebMCPPolyfill;
    const input = polyfill ? JSON.stringify(args ?? {}) : (args ?? {});
    return resultOf(await this.#context.executeTool(bridged.tool, input));
  }
}
