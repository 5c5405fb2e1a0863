// A page that offers tools through the W3C WebMCP API and knows nothing of Sealpost beyond
// loading its module. `?with=` picks what implements the API: `polyfill` (@mcp-b/webmcp-polyfill,
// loaded before Sealpost), `global` (@mcp-b/global, loaded after Sealpost), `none` (Sealpost's
// own context), `native` (Chromium's, when a flag enables it).
import { Sealpost } from '/sealpost/sealpost.js';

const variant = new URLSearchParams(location.search).get('with') ?? 'none';

function loadScript(src) {
  return new Promise((ok, fail) => {
    const script = document.createElement('script');
    script.src = src;
    script.onload = ok;
    script.onerror = fail;
    document.head.append(script);
  });
}

if (variant === 'global') await loadScript('/npm/@mcp-b/global/dist/index.iife.js');

window.Sealpost = Sealpost;
window.context = () => document.modelContext;
window.controllers = {};
window.slowRelease = null;

// The page's own tools, registered the WebMCP way; each can be withdrawn with its signal.
window.registerPageTool = async (tool) => {
  const controller = new AbortController();
  window.controllers[tool.name] = controller;
  await document.modelContext.registerTool(tool, { signal: controller.signal });
};
window.withdraw = (name) => window.controllers[name].abort();

window.registerShout = (description = 'Shouts the text back in capitals.') => window.registerPageTool({
  name: 'shout',
  description,
  inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  annotations: { readOnlyHint: true },
  execute: async ({ text }) => ({ content: [{ type: 'text', text: text.toUpperCase() }] }),
});

await window.registerShout();
await window.registerPageTool({
  name: 'slow_echo',
  description: 'Echoes the text once the page lets it.',
  inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
  execute: async ({ text }) => { await new Promise((ok) => { window.slowRelease = ok; }); return `echo: ${text}`; },
});

await window.registerPageTool({
  name: 'send_note',
  title: 'Send a note',
  description: 'Sends a note.',
  annotations: { destructiveHint: true },
  inputSchema: { type: 'object', properties: { body: { type: 'string' }, to: { type: 'string' } }, required: ['body', 'to'] },
  execute: async ({ body, to }) => `sent ${body.length} characters to ${to}`,
});

window.events = [];
window.openTab = async (options) => {
  const tab = await Sealpost.open(options);
  tab.events = [];
  tab.on('*', (event) => { tab.events.push(event); window.events.push(event); });
  return tab;
};
document.documentElement.dataset.ready = 'yes';
