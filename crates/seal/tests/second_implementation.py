#!/usr/bin/env python3
"""An independent implementation of docs/PROTOCOL.md, checked against tests/vectors.json.

It shares no code with crates/seal: HKDF and HMAC come from Python's standard library,
X25519 and XChaCha20-Poly1305 from libsodium (PyNaCl). If the document, the vectors and the
Rust code disagree, this fails. Run by `cargo xtask test`; by hand: `python3 <this file>`.
"""
import base64
import hashlib
import hmac
import json
import struct
import sys
from pathlib import Path

from nacl.bindings import (
    crypto_aead_xchacha20poly1305_ietf_encrypt as xchacha_seal,
    crypto_scalarmult,
    crypto_scalarmult_base,
)

LABEL = lambda name: b"sealpost/v1 " + name


def hkdf(ikm: bytes, salt: bytes, info: bytes) -> bytes:
    prk = hmac.new(salt or bytes(32), ikm, hashlib.sha256).digest()
    return hmac.new(prk, info + b"\x01", hashlib.sha256).digest()


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def u64(n: int) -> bytes:
    return struct.pack(">Q", n)


def pair_id(p: bytes) -> bytes:
    return hkdf(p, b"", LABEL(b"pair-id"))[:16]


def fingerprint(p: bytes, origin: str) -> str:
    n = struct.unpack(">I", hkdf(p, b"", LABEL(b"fingerprint") + origin.encode())[:4])[0]
    return f"{n % 1_000_000:06d}"


def pairing_code(p: bytes, origin: str, token: str) -> str:
    o, t = origin.encode(), token.encode()
    return "sppair1_" + b64(bytes([1]) + p + bytes([len(o)]) + o + struct.pack(">H", len(t)) + t)


def session(c: dict) -> dict:
    p = bytes.fromhex(c["secret"])
    sid = bytes.fromhex(c["session_id"])
    pid = pair_id(p)
    b = bytes.fromhex(c["browser_ephemeral"])
    big_b = crypto_scalarmult_base(b)
    head = bytes([1]) + sid + pid + big_b + u64(c["created_at_ms"]) + u64(c["expires_at_ms"])
    k_catalog = hkdf(p, sid, LABEL(b"catalog"))
    nonce = bytes.fromhex(c["catalog_nonce"])
    sealed = nonce + xchacha_seal(c["catalog"].encode(), head, nonce, k_catalog)
    signed = head + struct.pack(">I", len(sealed)) + sealed
    hello = signed + hmac.new(hkdf(p, b"", LABEL(b"hello")), signed, hashlib.sha256).digest()

    a = bytes.fromhex(c["plugin_ephemeral"])
    big_a = crypto_scalarmult_base(a)
    transcript = hashlib.sha256(bytes([1]) + pid + sid + big_b + big_a + u64(c["expires_at_ms"])).digest()
    shared = crypto_scalarmult(a, big_b)
    assert shared == crypto_scalarmult(b, big_a)
    ikm = shared + p
    k_call = hkdf(ikm, transcript, LABEL(b"plugin->browser"))
    k_reply = hkdf(ikm, transcript, LABEL(b"browser->plugin"))

    def envelope(kind, created, key, nonce_hex, plaintext):
        header = (bytes([1, kind]) + sid + bytes.fromhex(c["call_id"]) + big_a
                  + u64(created) + u64(c["call_expires_at_ms"]))
        n = bytes.fromhex(nonce_hex)
        return header + n + xchacha_seal(plaintext.encode(), header, n, key)

    call = envelope(1, c["call_created_at_ms"], k_call, c["call_nonce"], c["call_plaintext"])
    reply = envelope(2, c["reply_created_at_ms"], k_reply, c["reply_nonce"], c["reply_plaintext"])
    got = {"pair_id": pid.hex(), "hello": hello.hex(), "plugin_public": big_a.hex(),
           "k_call": k_call.hex(), "k_reply": k_reply.hex(), "call": call.hex(), "reply": reply.hex()}
    if "update" in c:
        u = c["update"]
        header = bytes([1]) + sid + pid + u64(u["seq"]) + u64(u["created_at_ms"])
        n = bytes.fromhex(u["nonce"])
        k_update = hkdf(p, sid, LABEL(b"catalog update"))
        got["catalog_update"] = (header + n + xchacha_seal(u["catalog"].encode(), header, n, k_update)).hex()
    return got


def main() -> int:
    path = Path(__file__).with_name("vectors.json")
    cases = json.loads(path.read_text())["cases"]
    checked, failures = 0, []
    for case in cases:
        kind, want = case["kind"], case["expect"]
        if kind == "pair_id":
            got = {"pair_id": pair_id(bytes.fromhex(case["secret"])).hex()}
        elif kind == "fingerprint":
            got = {"fingerprint": fingerprint(bytes.fromhex(case["secret"]), case["origin"])}
        elif kind == "pairing_code" and "code" in want:
            got = {"code": pairing_code(bytes.fromhex(case["secret"]), case["origin"], case["token"])}
        elif kind == "session":
            got = session(case)
        else:
            continue  # refusals are the Rust suite's to check
        checked += 1
        if got != want:
            failures.append(case["name"])
    for name in failures:
        print(f"second implementation disagrees with vector: {name}", file=sys.stderr)
    print(f"second implementation: {checked - len(failures)}/{checked} vectors agree")
    return 1 if failures or checked < 10 else 0


if __name__ == "__main__":
    sys.exit(main())
