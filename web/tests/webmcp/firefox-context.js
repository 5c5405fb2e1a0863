// A stand-in for the WebMCP of Firefox (pref `dom.modelcontext.enabled`), for a browser that
// lacks it: the earlier draft's `navigator.modelContext` with `registerTool(tool)` and
// `unregisterTool(name)` alone, a registry no page script can list or run, and no
// `document.modelContext`. Run before any page script (an init script).
(() => {
  const registered = new Map();
  class ModelContext {
    registerTool(tool) {
      if (!tool || typeof tool.name !== 'string' || typeof tool.execute !== 'function') throw new TypeError('registerTool: not a tool');
      if (registered.has(tool.name)) throw new DOMException(`Duplicate tool name: ${tool.name}`, 'InvalidStateError');
      registered.set(tool.name, tool);
    }

    unregisterTool(name) {
      if (!registered.delete(name)) throw new DOMException(`No tool named ${name}`, 'InvalidStateError');
    }
  }
  const context = new ModelContext();
  Object.defineProperty(Navigator.prototype, 'modelContext', { configurable: true, enumerable: true, get: () => context });
  // What the browser's agent would see, for a spec to read.
  Object.defineProperty(window, '__browserTools', { value: () => [...registered.keys()].sort() });
})();
