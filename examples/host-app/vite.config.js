import { defineConfig } from 'vite';

export default defineConfig({
  // Served as is, not pre-bundled: the module finds its Worker and wasm beside its own files.
  optimizeDeps: { exclude: ['@sealpost/browser'] },
});
