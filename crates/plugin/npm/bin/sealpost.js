#!/usr/bin/env node
// `npx -y @sealpost/plugin mcp`: starts the Sealpost plugin built for this platform, which npm
// installed as one of this package's optional dependencies, on this process's own stdin,
// stdout and stderr (the MCP client speaks to the plugin directly; nothing is copied here).
'use strict';

const { spawn } = require('node:child_process');

const target = `${process.platform}-${process.arch}`;
const exe = process.platform === 'win32' ? 'sealpost.exe' : 'sealpost';

let binary;
try {
  binary = require.resolve(`@sealpost/plugin-${target}/bin/${exe}`);
} catch {
  console.error(
    `sealpost: no plugin binary for ${target} was installed. Sealpost ships for linux-x64, ` +
      'linux-arm64, darwin-arm64, darwin-x64 and win32-x64; npm installs the one for this ' +
      'machine unless optional dependencies are turned off (--omit=optional, --no-optional). ' +
      'Reinstall with them on, or use `uvx sealpost` or the release archive.',
  );
  process.exit(1);
}

const child = spawn(binary, process.argv.slice(2), { stdio: 'inherit', windowsHide: true });
// A client that stops the launcher stops the plugin.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => child.kill(signal));
}
child.on('error', (error) => {
  console.error(`sealpost: cannot start ${binary}: ${error.message}`);
  process.exit(1);
});
child.on('exit', (code, signal) => {
  process.exit(code ?? (signal ? 128 + (require('node:os').constants.signals[signal] ?? 0) : 1));
});
