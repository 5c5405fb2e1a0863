-- Team sign-in through the team's identity provider (OpenID Connect, `--oidc-issuer`).

-- A sign-in in flight between the relay and the provider: the row a callback's `state` names,
-- stored as SHA-256 of the state, and deleted by the callback that uses it (so each flow works
-- once, on whichever replica the provider sends the browser back to). `browser_hash` is SHA-256
-- of the cookie the relay set on the browser that started the flow; `nonce` and
-- `pkce_verifier` are what the relay sent (as their hash or challenge) to the provider;
-- `app_challenge` the S256 PKCE challenge the app made, which the one-time sign-in code the
-- callback hands the app is bound to.
CREATE TABLE oidc_flows (
    state_hash    BYTEA   PRIMARY KEY,
    browser_hash  BYTEA   NOT NULL,
    nonce         TEXT    NOT NULL,
    pkce_verifier TEXT    NOT NULL,
    app_origin    TEXT    NOT NULL,
    app_challenge BYTEA   NOT NULL,
    expires_at    BIGINT  NOT NULL
);
CREATE INDEX oidc_flows_by_expiry ON oidc_flows (expires_at);

-- Who a person is at the provider: an owner is found by (issuer, subject), never by email.
-- `confirmed_at` is when the provider last vouched for them (a sign-in or a renewal);
-- `refresh_token` is sealed at rest (AES-256-GCM-SIV under a key derived from the client
-- secret, which the database does not hold); `renewing_until` is the lease of the replica
-- renewing it now.
CREATE TABLE owner_identities (
    issuer         TEXT    NOT NULL,
    subject        TEXT    NOT NULL,
    owner_id       BYTEA   NOT NULL UNIQUE REFERENCES owners(id),
    created_at     BIGINT  NOT NULL,
    confirmed_at   BIGINT  NOT NULL,
    refresh_token  BYTEA,
    renewing_until BIGINT,
    PRIMARY KEY (issuer, subject)
);

-- With `--oidc-recheck-hours`, the end of the owner's last confirmation at the provider: every
-- token of the owner stops working past it (checked with `disabled_at` on every request).
-- NULL: no re-check applies.
ALTER TABLE owners ADD COLUMN confirmed_until BIGINT;

-- A code the relay hands a host app after a provider's sign-in works only with the verifier of
-- the PKCE challenge (S256, the 32 digest bytes) the app started the flow with. NULL: a link.
ALTER TABLE signin_codes ADD COLUMN pkce_challenge BYTEA;
