// A real OpenID provider for the tests: `oidc-provider` (the certified Node implementation) on
// loopback, with the relay as a confidential client, a second client, and three people.
//
//   node web/tests/oidc/provider.mjs --redirect-uri URI [--redirect-uri URI…] [--client-secret S]
//
// Prints one line of JSON, {"issuer": "http://127.0.0.1:PORT"}, once it listens; stops when
// its stdin closes (so a test that dies leaves no provider behind). Its login page is the
// provider's own (any password). Test controls, under /_test/:
//   POST /_test/remove?user=ID    the person is removed: no sign-in, no refresh
//   POST /_test/tamper            the next ID token the token endpoint issues is replaced by
//                                 one built from a JSON body: {claims: {...overrides},
//                                 key: "provider"|"rogue"|"rogue-same-kid", alg: "none"?,
//                                 replay: true (the last ID token issued, verbatim),
//                                 raw: any JSON value sent as the id_token itself}
//   POST /_test/rotate            a new signing key replaces the old (new kid); grants and
//                                 refresh tokens stay
//   POST /_test/slow?ms=N         the token endpoint answers N ms late (a refresh in flight)
//   POST /_test/fail?status=S&error=E  the token endpoint answers S {"error": E} until
//                                 /_test/fail without parameters
//   POST /_test/claims?user=ID    the person's claims become the JSON body's (groups, …)
import http from 'node:http';
import { parseArgs } from 'node:util';
import Provider from 'oidc-provider';
import { createMemoryAdapter } from 'oidc-provider/lib/adapters/memory_adapter.js';
import * as jose from 'jose';

// Stdout carries the one line a test reads; the provider's notices go to stderr.
console.log = console.info = console.error;

const { values } = parseArgs({
  options: {
    'redirect-uri': { type: 'string', multiple: true, default: [] },
    'client-id': { type: 'string', default: 'sealpost-relay' },
    'client-secret': { type: 'string', default: 'relay-client-secret-for-tests' },
  },
});

const PEOPLE = {
  alice: { email: 'alice@team.example', email_verified: true, name: 'Alice', groups: ['sealpost'] },
  // In an allowed domain by address, but the provider has not verified it.
  mallory: { email: 'mallory@team.example', email_verified: false, name: 'Mallory' },
  bob: { email: 'bob@other.example', email_verified: true, name: 'Bob' },
};
const removed = new Set();

async function signingKey(kid) {
  const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
  return { ...(await jose.exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
}
let keys = [await signingKey('key-1')];
const rogue = await signingKey('rogue');

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

// One store for every provider instance: a key rotation (a new instance) keeps grants and
// refresh tokens, as a real provider's database does.
const adapter = createMemoryAdapter();

function makeProvider() {
  const provider = new Provider(issuer, {
    adapter,
    clients: [
      {
        client_id: values['client-id'],
        client_secret: values['client-secret'],
        redirect_uris: values['redirect-uri'],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
      },
      {
        client_id: 'another-app',
        client_secret: 'another-app-secret',
        redirect_uris: values['redirect-uri'],
        grant_types: ['authorization_code'],
        response_types: ['code'],
      },
    ],
    async findAccount(ctx, id) {
      if (!PEOPLE[id] || removed.has(id)) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, ...PEOPLE[id], preferred_username: id }) };
    },
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name', 'preferred_username', 'groups'],
    },
    // Scope claims go into the ID token, as Google, Entra, Okta and Keycloak put them there.
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => true },
    jwks: { keys },
    cookies: { keys: ['test-provider-cookie-key'] },
    // The person consented once and for all: the login page is the only interaction.
    async loadExistingGrant(ctx) {
      const kept = ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
      const found = kept ? await ctx.oidc.provider.Grant.find(kept) : undefined;
      if (found) return found;
      const grant = new ctx.oidc.provider.Grant({
        clientId: ctx.oidc.client.clientId,
        accountId: ctx.oidc.session.accountId,
      });
      grant.addOIDCScope('openid email profile offline_access');
      grant.addOIDCClaims(['email', 'email_verified', 'name', 'preferred_username', 'groups']);
      await grant.save();
      return grant;
    },
    // A refresh token for every client allowed one, as enterprise providers issue them.
    async issueRefreshToken(ctx, client) {
      return client.grantTypeAllowed('refresh_token');
    },
    // Each refresh hands back a new refresh token and spends the one presented; a spent one
    // presented again revokes the whole grant (reuse detection).
    rotateRefreshToken: true,
  });
  provider.use(tamperer);
  return provider;
}

let tamper = null;
let lastIdToken = null;
let slowMs = 0;
let failWith = null;

async function tamperer(ctx, next) {
  if (ctx.path === '/token' && slowMs > 0) await new Promise((resolve) => setTimeout(resolve, slowMs));
  if (ctx.path === '/token' && failWith) {
    ctx.status = failWith.status;
    ctx.body = { error: failWith.error };
    return;
  }
  await next();
  if (ctx.path !== '/token' || !ctx.body || typeof ctx.body !== 'object' || !ctx.body.id_token) {
    return;
  }
  const issued = ctx.body.id_token;
  if (tamper) {
    const plan = tamper;
    tamper = null;
    ctx.body = { ...ctx.body, id_token: await forge(issued, plan) };
  }
  lastIdToken = issued;
}

async function forge(issued, plan) {
  if (plan.replay) return lastIdToken;
  if ('raw' in plan) return plan.raw;
  const claims = { ...jose.decodeJwt(issued), ...(plan.claims ?? {}) };
  if (plan.alg === 'none') {
    const part = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');
    return `${part({ alg: 'none', typ: 'JWT' })}.${part(claims)}.`;
  }
  const key = plan.key === 'rogue' || plan.key === 'rogue-same-kid' ? rogue : keys[0];
  const kid = plan.key === 'rogue-same-kid' ? keys[0].kid : key.kid;
  const privateKey = await jose.importJWK(key, 'RS256');
  return new jose.SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid }).sign(privateKey);
}

let provider = makeProvider();

async function readJson(request) {
  let text = '';
  for await (const chunk of request) text += chunk;
  return text ? JSON.parse(text) : {};
}

server.on('request', async (request, response) => {
  const url = new URL(request.url, issuer);
  if (url.pathname.startsWith('/_test/')) {
    if (url.pathname === '/_test/remove') removed.add(url.searchParams.get('user'));
    else if (url.pathname === '/_test/tamper') tamper = await readJson(request);
    else if (url.pathname === '/_test/slow') slowMs = Number(url.searchParams.get('ms'));
    else if (url.pathname === '/_test/fail') {
      failWith = url.searchParams.has('status')
        ? { status: Number(url.searchParams.get('status')), error: url.searchParams.get('error') }
        : null;
    } else if (url.pathname === '/_test/claims') {
      Object.assign(PEOPLE[url.searchParams.get('user')], await readJson(request));
    }
    else if (url.pathname === '/_test/rotate') {
      keys = [await signingKey(`key-${Date.now()}`)];
      provider = makeProvider();
    } else {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(204).end();
    return;
  }
  provider.callback()(request, response);
});

process.stdout.write(`${JSON.stringify({ issuer })}\n`);
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
