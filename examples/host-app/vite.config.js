// Vite builds the app with nothing configured. The dev server pre-bundles dependencies into
// node_modules/.vite/deps, which loses the Worker and the wasm that @sealpost/browser finds
// beside its own files (`new URL(…, import.meta.url)`): serve the package as it is instead.
export default {
  optimizeDeps: { exclude: ['@sealpost/browser'] },
};
