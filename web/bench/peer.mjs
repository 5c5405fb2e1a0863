// The peer `cargo xtask bench web` measures Sealpost against: MCP-B's
// `@mcp-b/webmcp-local-relay` (an MCP stdio server with a loopback WebSocket that pages join
// through `@mcp-b/global`), pinned in web/package-lock.json. Plaintext, open to any local
// process or page, no grants: what people reach for today to call a tab's tools.
//
// A page served from loopback (nothing from a CDN) registers `echo` and `search` through
// `document.modelContext.registerTool` before it loads the relay's embed (2.2.0's embed sends
// only the tools that exist when the page joins), and the same stdio client that drives
// `sealpost mcp` spawns the peer's CLI.
//
// `search` ranks the same documents with MiniSearch (BM25 over title and body, no stemming)
// and answers the top 10 with a 240-character snippet cut around the first query word, as
// `search_workspace` answers its top 10; Sealpost's engine also stems, folds Unicode, checks
// grants and writes an audit record for each call.

import { createServer } from 'node:http';
import { createReadStream, rmSync } from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { McpClient, tempDir } from '../tests/harness.mjs';

const modules = fileURLToPath(new URL('../node_modules/', import.meta.url));
const RELAY_PACKAGE = join(modules, '@mcp-b/webmcp-local-relay');

const PAGE = (port) => `<!doctype html>
<html><head><meta charset="utf-8"><title>peer bench</title><script src="/global.js"></script></head>
<body><script type="module">
import MiniSearch from '/minisearch.js';
const documents = await (await fetch('/documents.json')).json();
const index = new MiniSearch({ fields: ['title', 'body'], storeFields: ['title', 'body'] });
index.addAll(documents);
const snippet = (body, query) => {
  const word = query.toLowerCase().match(/[\\p{L}\\p{N}]+/u)?.[0] ?? '';
  const at = Math.max(0, body.toLowerCase().indexOf(word) - 80);
  return body.slice(at, at + 240);
};
await document.modelContext.registerTool({
  name: 'echo',
  description: 'Echoes the text.',
  inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  execute: async ({ text }) => ({ content: [{ type: 'text', text }] }),
});
await document.modelContext.registerTool({
  name: 'search',
  description: 'Searches the documents.',
  inputSchema: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
  execute: async ({ query }) => {
    const hits = index.search(query.replaceAll('"', '').replace(/\\*$/, ''), { prefix: query.endsWith('*') }).slice(0, 10);
    const text = hits.map((hit) => \`\${hit.title}\\n\${snippet(hit.body, query)}\`).join('\\n\\n');
    return { content: [{ type: 'text', text: text || 'No documents match.' }] };
  },
});
const embed = document.createElement('script');
embed.src = '/relay/embed.js';
embed.dataset.relayPort = '${port}';
document.body.append(embed);
</script></body></html>`;

// A free loopback port for the peer's WebSocket (it would otherwise take 9333, or join a relay
// already there).
async function freePort() {
  const server = createNetServer();
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address();
  await new Promise((ok) => server.close(ok));
  return port;
}

// Starts the peer beside `browser`, its page holding `documents`; answers its MCP client.
export async function startPeer(browser, documents) {
  const port = await freePort();
  const files = {
    '/global.js': [join(modules, '@mcp-b/global/dist/index.iife.js'), 'text/javascript'],
    '/minisearch.js': [join(modules, 'minisearch/dist/es/index.js'), 'text/javascript'],
    '/relay/embed.js': [join(RELAY_PACKAGE, 'dist/browser/embed.js'), 'text/javascript'],
    '/relay/widget.html': [join(RELAY_PACKAGE, 'dist/browser/widget.html'), 'text/html'],
  };
  const body = JSON.stringify(documents.map(({ id, title, body }) => ({ id, title, body })));
  const server = createServer((request, response) => {
    const path = new URL(request.url, 'http://x').pathname;
    if (path === '/') {
      response.writeHead(200, { 'content-type': 'text/html' }).end(PAGE(port));
    } else if (path === '/documents.json') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(body);
    } else if (files[path]) {
      response.writeHead(200, { 'content-type': files[path][1] });
      createReadStream(files[path][0]).pipe(response);
    } else {
      response.writeHead(404).end();
    }
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const origin = `http://127.0.0.1:${server.address().port}`;
  // The peer keeps its port in ~/.webmcp: a home of its own keeps that out of the person's.
  const home = tempDir('sealpost-bench-peer-');
  const mcp = new McpClient(home, {
    env: { HOME: home },
    command: [process.execPath, join(RELAY_PACKAGE, 'dist/cli.js'), '--port', String(port), '--widget-origin', origin],
  });
  const context = await browser.newContext();
  // The peer's CLI does not end with its stdin: it is stopped, and waited for.
  const close = async () => {
    const running = mcp.child.exitCode === null && mcp.child.signalCode === null;
    const exited = running ? new Promise((ok) => mcp.child.once('exit', ok)) : null;
    mcp.child.kill();
    await exited;
    await context.close();
    server.closeAllConnections();
    server.close();
    rmSync(home, { recursive: true, force: true });
  };
  try {
    await mcp.initialize();
    const page = await context.newPage();
    page.on('pageerror', (error) => console.error('peer page error:', error.message));
    await page.goto(`${origin}/`);
    const listed = async () => (await mcp.request('tools/list')).result.tools.map((tool) => tool.name);
    for (let i = 0; ; i += 1) {
      const names = await listed();
      if (names.includes('echo') && names.includes('search')) break;
      if (i === 300) throw new Error(`the peer never listed the page's tools: ${names.join(', ')}`);
      await new Promise((ok) => setTimeout(ok, 100));
    }
    return { mcp, page, close };
  } catch (error) {
    await close();
    throw error;
  }
}
