// A package registry on loopback serving the npm tarballs `cargo xtask dist` made, so npx
// installs `@sealpost/plugin` and its platform package exactly as it would from npmjs.com:
// packuments with `os`, `cpu`, `bin` and `optionalDependencies` read from each tarball's own
// package.json, and integrity hashes. A package it does not hold answers 404, as an
// unpublished one does.

import { createServer } from 'node:http';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export async function startRegistry(dir) {
  const packages = new Map();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.tgz'))) {
    const bytes = readFileSync(join(dir, file));
    const manifest = JSON.parse(execFileSync('tar', ['-xzOf', join(dir, file), 'package/package.json']));
    packages.set(manifest.name, { file, bytes, manifest });
  }
  const requested = [];
  const server = createServer((request, response) => {
    const path = decodeURIComponent(request.url.split('?')[0]).slice(1);
    requested.push(path);
    const tarball = path.startsWith('-/') && [...packages.values()].find((p) => p.file === path.slice(2));
    if (tarball) {
      response.writeHead(200, { 'content-type': 'application/octet-stream' });
      response.end(tarball.bytes);
      return;
    }
    const found = packages.get(path);
    if (!found) {
      response.writeHead(404, { 'content-type': 'application/json' });
      response.end('{"error":"not found"}');
      return;
    }
    const { manifest, bytes, file } = found;
    const base = `http://127.0.0.1:${server.address().port}`;
    const version = {
      ...manifest,
      dist: {
        tarball: `${base}/-/${file}`,
        integrity: `sha512-${createHash('sha512').update(bytes).digest('base64')}`,
        shasum: createHash('sha1').update(bytes).digest('hex'),
      },
    };
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({
      name: manifest.name,
      'dist-tags': { latest: manifest.version },
      versions: { [manifest.version]: version },
    }));
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return {
    url: `http://127.0.0.1:${server.address().port}/`,
    requested,
    close: () => server.close(),
  };
}
