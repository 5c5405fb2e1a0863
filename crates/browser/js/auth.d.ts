// TypeScript declarations for auth.js: signing a person in to a host app and renewing the
// sign-in, through the relay's API.

/** The relay's error codes these calls meet, and the ones auth.js adds. */
export type AuthErrorCode =
  | 'invalid_signin_code'
  | 'unauthorized'
  | 'wrong_token_kind'
  | 'rate_limited'
  | 'owner_rate_limited'
  /** The relay refused this page's origin; also when its CORS gate did (status 0): the relay
   *  is up and does not list the origin (--app-origin). */
  | 'origin_not_allowed'
  | 'unavailable'
  /** The relay could not be reached. */
  | 'network'
  | 'bad_response'
  | 'bad_relay_origin'
  | 'oidc_not_configured'
  | (string & {});

/** A refusal or failure, with the relay's error code when it sent one. */
export class AuthError extends Error {
  constructor(message: string, options?: { code?: AuthErrorCode; status?: number; retryAfterS?: number | null });
  readonly name: 'AuthError';
  readonly code: AuthErrorCode;
  /** The HTTP status, or 0 when the relay was not reached. */
  readonly status: number;
  /** Seconds to wait before trying again, when the relay said (a 429 or 503). */
  readonly retryAfterS: number | null;
}

/** What a sign-in link's fragment carries: `#signin=CODE&relay=RELAY`. */
export interface SignInLink {
  /** The one-time code; it works once, for 15 minutes. */
  code: string;
  /** The relay's public URL to exchange it with; null in a link to the relay's own app. */
  relayOrigin: string | null;
}

/** A sign-in, as `signIn` and `renew` resolve to it. */
export interface SignedIn {
  /** The owner token, sent as `Authorization: Bearer`. A secret: never log it. */
  token: string;
  owner: { id: string; name: string };
  /** When the token lapses unless renewed, Unix ms (never past the sign-in's absolute end). */
  expiresAt: number;
  /** The host app's origin the sign-in is scoped to; null for the relay's own app. */
  appOrigin: string | null;
}

/** The sign-in a link carries (default: this page's `location.hash`), or null. */
export function readSignInLink(hashOrUrl?: string): SignInLink | null;

/** Exchanges a one-time sign-in code for an owner token (`POST /v1/auth/signin`). */
export function signIn(code: string, relayOrigin?: string | null): Promise<SignedIn>;

/** Renews a sign-in (`GET /v1/me`); the new token replaces the one given. */
export function renew(token: string, relayOrigin?: string | null): Promise<SignedIn>;

/** The team's identity provider, as the relay offers it. */
export interface TeamSignIn {
  /** The provider's issuer URL. */
  issuer: string;
  /** The relay's start page (`startTeamSignIn` adds the PKCE challenge and the app). */
  startUrl: string;
}

/** Whether the relay offers team sign-in (`GET /v1/auth/providers`); null: links only. */
export function teamSignInOffered(relayOrigin?: string | null): Promise<TeamSignIn | null>;

/**
 * Starts a team sign-in: keeps a PKCE verifier in this tab's sessionStorage and navigates to
 * the provider's login page by way of the relay. The browser comes back to this page with
 * `#signin=CODE&relay=RELAY`; `signIn` then sends the kept verifier with the code.
 */
export function startTeamSignIn(relayOrigin?: string | null): Promise<void>;
