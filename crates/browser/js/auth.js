// Signing a person in to a host app and keeping the sign-in alive: the calls a page makes to
// the relay before it opens Sealpost (sealpost.js), with errors a page can act on.
//
// The relay's operator (`sealpost-relay owner link NAME --app ORIGIN`), or the person from
// a page already signed in (`POST /v1/auth/signin-links` with `app_origin`), makes a one-time
// link `ORIGIN/#signin=CODE&relay=RELAY`, RELAY being the relay's public URL, form-encoded.
//
//   const link = readSignInLink(location.hash);
//   if (link) {
//     history.replaceState(null, '', location.pathname + location.search); // it works once
//     const { token, expiresAt } = await signIn(link.code, link.relayOrigin);
//   }
//   const { token: renewed, expiresAt } = await renew(token, relayOrigin); // a new token each time
//
// Team sign-in, when the relay is set up for the team's identity provider (OpenID Connect):
//
//   if (await teamSignInOffered(relayOrigin)) button.onclick = () => startTeamSignIn(relayOrigin);
//
// sends the browser to the provider's login page by way of the relay; it comes back to this
// page with `#signin=CODE&relay=RELAY`, read as above: `signIn` adds the PKCE verifier this
// page kept (sessionStorage), without which the code does not work.
//
// A sign-in lapses seven days after its last renewal, and thirty days after the sign-in (or
// after the sign-in whose link it came from) whatever is done. The token is a secret: keep it
// where the app keeps secrets, never in a URL or a log.
//
// TypeScript declarations: auth.d.ts.

/** A refusal or failure, with the relay's error code when it sent one. */
export class AuthError extends Error {
  constructor(message, { code, status = 0, retryAfterS = null } = {}) {
    super(message);
    this.name = 'AuthError';
    // The relay's stable code (`invalid_signin_code`, `unauthorized`, `rate_limited`, …), or
    // `network`, `bad_response`, `bad_relay_origin`, `wrong_token_kind` from here.
    this.code = code;
    this.status = status;
    // Seconds to wait before trying again, when the relay said (a 429 or 503).
    this.retryAfterS = retryAfterS;
  }
}

/** The sign-in a one-time link carries: `{ code, relayOrigin }`, or null when there is none. */
export function readSignInLink(hashOrUrl = globalThis.location?.hash ?? '') {
  const text = String(hashOrUrl);
  const hash = text.includes('#') ? text.slice(text.indexOf('#') + 1) : text;
  const params = new URLSearchParams(hash);
  const code = params.get('signin');
  if (!code) return null;
  return { code, relayOrigin: params.get('relay') };
}

/**
 * Exchanges a one-time sign-in code for an owner token. Resolves to
 * `{ token, owner: { id, name }, expiresAt, appOrigin }` (`appOrigin`: the host app the
 * sign-in is scoped to, null for the relay's own app).
 */
export async function signIn(code, relayOrigin) {
  if (typeof code !== 'string' || code === '') {
    throw new AuthError('There is no sign-in code: open the sign-in link you were given.', { code: 'invalid_signin_code' });
  }
  // A team sign-in's code works only with the verifier this page kept when it started it.
  const verifier = takeVerifier();
  const body = await request(relayOrigin, '/v1/auth/signin', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(verifier ? { code, code_verifier: verifier } : { code }),
  });
  return signedIn(body, body.token);
}

// Where the page keeps the PKCE verifier of a team sign-in it started: this tab only, and
// only until the sign-in comes back.
const VERIFIER_KEY = 'sealpost.team-signin.verifier';

function takeVerifier() {
  const storage = globalThis.sessionStorage;
  const verifier = storage?.getItem(VERIFIER_KEY) ?? null;
  storage?.removeItem(VERIFIER_KEY);
  return verifier;
}

/**
 * Whether the relay offers team sign-in: resolves to `{ issuer, startUrl }`, or null when it
 * signs people in by links only.
 */
export async function teamSignInOffered(relayOrigin) {
  const body = await request(relayOrigin, '/v1/auth/providers', {});
  if (!body.oidc) return null;
  return { issuer: body.oidc.issuer, startUrl: body.oidc.start_url };
}

/**
 * Starts a team sign-in: keeps a fresh PKCE verifier in this tab and sends the browser to the
 * relay, which sends it to the provider's login page; it comes back to this page's origin with
 * `#signin=CODE`. A host app (a page on another origin than the relay's) is named to the relay,
 * which sends the person back only to an origin it lists.
 */
export async function startTeamSignIn(relayOrigin) {
  const offered = await teamSignInOffered(relayOrigin);
  if (!offered) {
    throw new AuthError('This relay does not offer team sign-in: ask for a sign-in link.', { code: 'oidc_not_configured', status: 404 });
  }
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  const verifier = base64url(bytes);
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
  globalThis.sessionStorage.setItem(VERIFIER_KEY, verifier);
  const start = new URL(offered.startUrl);
  start.searchParams.set('code_challenge', base64url(digest));
  start.searchParams.set('code_challenge_method', 'S256');
  const own = globalThis.location.origin;
  if (own !== new URL(base(relayOrigin)).origin) start.searchParams.set('app_origin', own);
  globalThis.location.assign(start.href);
}

function base64url(bytes) {
  let text = '';
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/**
 * Renews a sign-in (`GET /v1/me`): resolves to the same shape as `signIn`, with a new token
 * that replaces the one given, valid seven days more but never past the sign-in's end.
 */
export async function renew(token, relayOrigin) {
  if (typeof token !== 'string' || token === '') {
    throw new AuthError('There is no sign-in to renew: sign in first.', { code: 'unauthorized', status: 401 });
  }
  const body = await request(relayOrigin, '/v1/me', { headers: { authorization: `Bearer ${token}` } });
  if (body.token_kind !== 'owner' || typeof body.token !== 'string') {
    throw new AuthError('This is a plugin\'s token, not a sign-in: it cannot be renewed.', { code: 'wrong_token_kind', status: 403 });
  }
  return signedIn(body, body.token);
}

function signedIn(body, token) {
  return {
    token,
    owner: { id: body.owner?.id, name: body.owner?.name },
    expiresAt: body.expires_at,
    appOrigin: body.app_origin ?? null,
  };
}

// The relay's base URL, as the link's `relay` (or the page's own origin for the relay's app).
function base(relayOrigin) {
  const given = relayOrigin ?? globalThis.location?.origin;
  let url;
  try {
    url = new URL(given);
  } catch {
    throw new AuthError(`${given} is not the relay's address: pass the link's relay, e.g. https://relay.example.`, { code: 'bad_relay_origin' });
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new AuthError(`${given} is not an http(s) address of a relay.`, { code: 'bad_relay_origin' });
  }
  return url.href.replace(/\/+$/, '');
}

// Why a request to the relay got no answer the page may read. A browser reports a relay that
// is down and one whose CORS gate refused this page's origin alike; a request the page cannot
// read (`no-cors`, no credentials) still tells them apart: it gets through only when the relay
// is up. `origin_not_allowed`: the relay is up and does not list this origin (--app-origin);
// `network`: it could not be reached.
export async function unansweredCause(relay) {
  let page = null;
  try { page = globalThis.location?.origin ?? null; } catch { page = null; }
  if (!page || !relay || new URL(relay, page).origin === page) return 'network';
  try {
    await fetch(`${relay}/`, { mode: 'no-cors', credentials: 'omit', cache: 'no-store' });
    return 'origin_not_allowed';
  } catch {
    return 'network';
  }
}

async function request(relayOrigin, path, init) {
  const relay = base(relayOrigin);
  let response;
  try {
    // A bearer token only: no cookie or other credential of the page goes with it.
    response = await fetch(`${relay}${path}`, { ...init, credentials: 'omit', cache: 'no-store' });
  } catch (error) {
    if (await unansweredCause(relay) === 'origin_not_allowed') {
      throw new AuthError(`The relay at ${relay} answers, but does not list this page's origin ${location.origin}: its operator adds it with --app-origin.`, { code: 'origin_not_allowed' });
    }
    throw new AuthError(`The relay at ${relay} could not be reached (${error.message}). Check the connection, and that the relay lists this page's origin (--app-origin).`, { code: 'network' });
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const retry = Number.parseInt(response.headers.get('retry-after') ?? '', 10);
    const error = body?.error;
    throw new AuthError(error?.message ?? `The relay answered ${response.status}.`, {
      code: error?.code ?? 'bad_response',
      status: response.status,
      retryAfterS: Number.isFinite(retry) ? retry : null,
    });
  }
  if (!body || typeof body !== 'object') {
    throw new AuthError(`The relay at ${relay} did not answer as a Sealpost relay does.`, { code: 'bad_response', status: response.status });
  }
  return body;
}
