//! Relay HTTP API: request and response bodies and stable error codes.
