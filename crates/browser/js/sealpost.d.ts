// TypeScript declarations for sealpost.js, the page's API to Sealpost's browser module.

import type { SignInLink, SignedIn, TeamSignIn } from './auth.js';
export { AuthError } from './auth.js';
export type { AuthErrorCode, SignInLink, SignedIn, TeamSignIn } from './auth.js';

export type ToolKind = 'read' | 'proposal';

export interface ToolSpec {
  /** `[A-Za-z0-9_.-]{1,48}`; names starting `sealpost` in any case are reserved. */
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  inputSchema: Record<string, unknown>;
  /** `read`: the handler runs and answers the call. `proposal`: the handler is never called;
   *  the call is saved for review, and `applyProposal` hands its arguments back to the host. */
  kind: ToolKind;
}

/** A string, or at least one of `text` and `structured`. The MCP client gets the text (or,
 *  without one, `structured` as JSON), fenced by the plugin, with `isError` as given;
 *  `structured` itself is not passed on. A handler that throws answers refusal `tool_failed`
 *  with its message; one that rejects with `code: 'declined'` or `'not_confirmed'`, that
 *  refusal. */
export type ToolAnswer = string | { text?: string; structured?: unknown; isError?: boolean };
export type ToolHandler = (args: Record<string, unknown>) => ToolAnswer | Promise<ToolAnswer>;

/** What the person allows; the module keeps it in the workspace. */
export interface Grants {
  access: 'on' | 'off';
  /** Sources whose documents the built-in tools may read and propose changes to. */
  sources: string[];
  /** Tools the agent may call, built-in ones included, by name. */
  tools: string[];
  /** Each granted host tool's digest as it was when granted, filled in by the module. Leave it
   *  out when passing what the person just chose (each tool is bound to the one registered
   *  now), or pass back what `grants()` gave. A tool registered again with other text, schema
   *  or hints is not granted. */
  pins?: Record<string, string>;
}

/** One tool as a grant picker shows it. */
export interface ListedTool {
  name: string;
  description: string;
  kind: ToolKind;
  builtin: boolean;
  /** `page`: registered by the page's script through WebMCP; each call asks the person. */
  source: 'builtin' | 'app' | 'page';
  /** Offered to a session now (when access is on). */
  granted: boolean;
  /** Granted once, but registered since with other text, schema or hints: grant it afresh. */
  changedSinceGrant: boolean;
}

export interface Document {
  id: string;
  source: string;
  title: string;
  body: string;
  updated_at_ms: number;
}

export interface DocumentSummary {
  id: string;
  source: string;
  title: string;
  chars: number;
  updated_at_ms: number;
}

export interface PairingInfo {
  pairId: string;
  tokenId: string;
  fingerprint: string;
  pairingCode: string;
}

export interface SessionStarted {
  sessionId: string;
  /** Unix ms. Keep it to `resume(until)` after a reload: the module does not remember it. */
  expiresAt: number;
  /** `sppair1_…` for `sealpost pair`: a secret, it carries the plugin's token. */
  pairingCode: string;
  /** Six digits (`986846`); the plugin prints the same digits grouped (`986 846`). */
  fingerprint: string;
}

/** `locked`: `lock()`. `signed_out`: `stop('signed_out')`. `session_ended`: `endSession()`, the
 *  page gone, or a newer session of the pairing (another tab or device). `expired`: its time ran
 *  out. `token_revoked`: the relay refused the owner token. `taken_over`: another tab of this
 *  origin took serving over (`serve({ takeOver: true })`). */
export type StopReason = 'locked' | 'signed_out' | 'session_ended' | 'expired' | 'token_revoked' | 'taken_over';

export type SealpostEvent =
  | { type: 'audit'; record: AuditRecord }
  | { type: 'serving' }
  /** The relay has seen this tab claim for the session: a call made now is served, not
   *  answered "tab not open". Once per session the loop serves. */
  | { type: 'ready'; sessionId: string }
  | { type: 'claimed'; count: number }
  | { type: 'retrying'; delayMs: number; error: string }
  /** A call's answer was refused for a passing reason; it is sent again after `delayMs`. */
  | { type: 'retrying_answer'; delayMs: number; error: string }
  /** How the loop talks to the relay now: its WebSocket channel, or HTTP (`fetch`). */
  | { type: 'transport'; transport: 'channel' | 'http' }
  | { type: 'stopped'; reason: StopReason }
  | { type: 'elsewhere'; tabId: string }
  | { type: 'index_saved'; bytes: number }
  /** A page's WebMCP tool Sealpost does not offer (its name breaks the rules or is taken). */
  | { type: 'tool_refused'; name: string; message: string }
  /** What `allTools()` lists changed (a tool registered or withdrawn, the page's WebMCP tools
   *  included): a grant picker reads it again. */
  | { type: 'tools_changed' }
  | { type: 'warning'; message: string };

/** What `open({ onWarning })` hears and `tab.warnings` keeps. */
export type WarningEvent = Extract<SealpostEvent, { type: 'warning' | 'tool_refused' }>;

export interface AuditRecord {
  at_ms: number;
  call_id: string | null;
  tool: string | null;
  /** SHA-256 (hex) of the arguments' JSON: the arguments themselves are never kept. */
  arguments_digest: string | null;
  /** `answered`, `answered_with_error`, `proposal_saved` {proposal_id}, `refused` {code:
   *  `not_granted`, `unknown_tool`, `bad_arguments`, `locked`, `tool_failed`, `too_large`,
   *  `declined`, `not_confirmed`}, `cancelled` {reason: `client_cancelled`, `undecryptable`,
   *  `replayed`, `expired`, `session_ended`}; review decisions: `proposal_applied`,
   *  `proposal_rejected`, `proposal_apply_refused` {proposal_id}. */
  outcome: { type: string; [key: string]: unknown };
  reply_bytes: number;
  /** For a call: whether the relay took its answer. `not_delivered` means the agent never got it. */
  delivery?: { type: 'accepted' } | { type: 'not_delivered'; why: string };
}

/** Where the search index came from at open. */
export interface IndexRestored {
  /** `snapshot`: the kept snapshot covered exactly the kept documents; `documents`: their text was indexed. */
  from: 'snapshot' | 'documents';
  /** Why a kept snapshot was not used (`null` when it was, or when there was none). A damaged one is also in `problems`. */
  reason: 'damaged' | 'version' | 'stale' | null;
  message: string | null;
}

export interface Restored {
  problems: string[];
  index: IndexRestored;
  pairing: PairingInfo | null;
  documents: DocumentSummary[];
  sources: string[];
  grants: Grants;
  /** Whether a passphrase protects this workspace at rest. */
  passphrase: boolean;
}

/** An error from the module; `code` is set where the page can act on it. `closed`: the tab
 *  was closed (every method after `close()` rejects at once with it); `origin_not_allowed`:
 *  the relay is up but does not list this page's origin (--app-origin); `network`: the relay
 *  could not be reached. */
export interface SealpostError extends Error {
  code?: 'passphrase_required' | 'wrong_passphrase' | 'weak_passphrase' | 'damaged' | 'closed' | 'origin_not_allowed' | 'network';
}

export declare class Sealpost {
  /** auth.js's `readSignInLink`: the sign-in a link's fragment carries, or null. */
  static readSignInLink(hashOrUrl?: string): SignInLink | null;
  /** auth.js's `signIn`: exchanges a one-time sign-in code for an owner token; rejects with an `AuthError`. */
  static signIn(code: string, relayOrigin?: string | null): Promise<SignedIn>;
  /** auth.js's `renew`: a new token in place of the one given; rejects with an `AuthError`. */
  static renew(token: string, relayOrigin?: string | null): Promise<SignedIn>;
  /** Whether the relay offers team sign-in (its identity provider); null: links only. */
  static teamSignInOffered(relayOrigin?: string | null): Promise<TeamSignIn | null>;
  /** Goes to the provider's login page by way of the relay; comes back with `#signin=`. */
  static startTeamSignIn(relayOrigin?: string | null): Promise<void>;
  /** `webmcp: false` leaves the page's WebMCP tools out (default: offered once granted);
   *  `confirmWithinMs` shortens how long a page tool's call waits for the person (at most 20 s);
   *  `onWarning` hears every `warning` and `tool_refused` event from the start, those raised
   *  while `open()` runs included.
   *  Rejects with a {@link SealpostError} (`passphrase_required`, `wrong_passphrase`) when a passphrase protects the workspace. */
  static open(options: { ownerToken: string; relayOrigin?: string | null; workspace?: string; workerUrl?: string | URL; passphrase?: string; webmcp?: boolean; confirmWithinMs?: number; onWarning?: (event: WarningEvent) => void }): Promise<Sealpost>;
  restored: Restored;
  /** Every `warning` and `tool_refused` event this tab raised, oldest first (the last 100),
   *  those raised while `open()` ran included, before any listener could be added. */
  readonly warnings: WarningEvent[];
  on<T extends SealpostEvent['type'] | '*'>(
    type: T,
    listener: (event: T extends '*' ? SealpostEvent : Extract<SealpostEvent, { type: T }>) => void,
  ): () => void;
  registerTool(spec: ToolSpec, handler: ToolHandler): Promise<void>;
  addSource(name: string): Promise<void>;
  putDocuments(documents: Document[]): Promise<number>;
  removeDocument(id: string): Promise<void>;
  /** Writes the search index snapshot now (it is otherwise written once changes stop for 2 s). */
  saveIndex(): Promise<void>;
  document(id: string): Promise<Document | null>;
  documents(): Promise<DocumentSummary[]>;
  sources(): Promise<string[]>;
  setGrants(grants: Grants): Promise<void>;
  grants(): Promise<Grants>;
  allTools(): Promise<ListedTool[]>;
  pairing(): Promise<PairingInfo | null>;
  newPairing(label?: string): Promise<PairingInfo>;
  unpair(): Promise<void>;
  /** Starts a session of `ttlS` seconds (making the pairing first when there is none); a
   *  session already served is replaced, and `serve()` carries on into the new one. */
  startSession(ttlS: number): Promise<SessionStarted>;
  /** After a reload: starts a fresh session on the remembered pairing lasting until `until`
   *  (Unix ms), the `expiresAt` the page kept; null when there is no pairing or under a second
   *  is left. Serve it with `takeOver: true`. */
  resume(until: number): Promise<SessionStarted | null>;
  session(): Promise<{ sessionId: string; expiresAt: number } | null>;
  /** Whether another tab of this origin serves this pairing now (it holds the serving lock). */
  servedElsewhere(): Promise<boolean>;
  /** What the relay knows of the live session: how long ago (on the relay's clock) the tab
   *  last asked for calls and the plugin last looked the session up (`null`: never), or
   *  `null` when no session is live there. */
  liveStatus(): Promise<{ tabSeenAgoMs: number | null; pluginSeenAgoMs: number | null; expiresAt: number } | null>;
  endSession(options?: { keepalive?: boolean }): Promise<void>;
  /** Serves calls until a stop. One tab of an origin serves a pairing at a time: without
   *  `takeOver` this resolves `served_elsewhere` at once when another tab serves it; with it,
   *  that tab stops with `taken_over`. Start or resume a session in this tab first. */
  serve(options?: { takeOver?: boolean }): Promise<StopReason | 'already_serving' | 'served_elsewhere'>;
  stop(reason: 'locked' | 'signed_out' | 'session_ended' | 'taken_over'): Promise<void>;
  lock(): Promise<void>;
  /** Proposals waiting for review, each `{ id, created_at_ms, tool, change, base_digest }`;
   *  `change.type` is `create_note`, `append_note`, `edit_note` or `host_tool` {tool, arguments}. */
  pendingProposals(): Promise<unknown[]>;
  /** A built-in's change is written (`docId`); rejects when the document changed since. A host
   *  proposal tool's is handed back (`hostTool`) for the host to carry out. */
  applyProposal(id: string): Promise<{ docId: string } | { hostTool: { tool: string; arguments: unknown } }>;
  rejectProposal(id: string): Promise<void>;
  /** Every audit record kept, newest first; `unreadable` counts those that did not open. */
  auditLog(): Promise<{ entries: AuditRecord[]; unreadable: number }>;
  /** Protects the workspace at rest (PBKDF2-HMAC-SHA-256, 600,000 iterations, per-workspace salt), or with null goes back to the device key. Answers whether a passphrase now protects it. */
  setPassphrase(passphrase: string | null): Promise<boolean>;
  /** After `lock`, opens the sealed records again. */
  unlock(passphrase: string): Promise<void>;
  setOwnerToken(token: string): Promise<void>;
  endOnPagehide(): void;
  /** Ends the worker and every key it held (after sign-out or lock). A call still waiting, and
   *  every call after, rejects at once with a {@link SealpostError} of code `closed`. */
  close(): void;
}
