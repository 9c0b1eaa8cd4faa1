#!/usr/bin/env python3
"""net/fuzz/make_corpus.py: writes the committed seed inputs of the net/ fuzz targets into
net/fuzz/corpus/{envelope,handshake,store_delta}/ (rerun it after changing an input layout, and commit the files).

Promises: deterministic output (the same bytes every run), every seed small (well under 64 KiB),
and seeds that are valid in the layouts documented at the top of envelope_fuzz.cc and
handshake_fuzz.cc: sealed envelopes under the targets' fixed key, handshake messages with correct
MACs under their fixed secret, so the fuzzer starts from inputs that get past the checks and
reach establishment and delivery (check with DAGSIM_FUZZ_TRACE=1 build/fuzz/<target>_fuzz FILE).
The constants below must match the targets'.
"""
import hashlib
import hmac
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# envelope_fuzz.cc: kKey
ENVELOPE_KEY = bytes((0x11 + 7 * i) & 0xFF for i in range(32))
# handshake_fuzz.cc: kSecret, kClusterId, the nonces of modes 0 and 1
SECRET = b"dagsim fuzz: the cluster's shared secret"
CLUSTER_ID = 0x0123456789ABCDEF
LISTENER_NONCE = bytes((0xA0 + i) & 0xFF for i in range(32))
DIALER_NONCE = bytes((0x30 + i) & 0xFF for i in range(32))
MAGIC = 0x48534744
VERSION = 1

# Chunk schedule bytes (fuzz_util.h): bits 0-2 the read size, bit 3 varying sizes.
ONE_BYTE, SEVEN_BYTES, WHOLE, VARYING_61, VARYING_4096 = 0x00, 0x03, 0x07, 0x5D, 0x3E
LIMIT_1MIB = 20  # envelope limits byte: max_payload_bytes = 2^20


def mac(key, *parts):
    return hmac.new(key, b"".join(parts), hashlib.sha256).digest()


# --- envelopes (net/envelope.h) ---

def envelope(payload, padding=0, seq=None):
    """One envelope on the wire; `seq` given: authenticated, else trusted.

    Envelopes carry a Poly1305 tag under a ChaCha20-derived key (net/crypto.h, EnvelopeMac) that
    Python's standard library cannot compute, so
    the tag written here (truncated HMAC, the earlier format) never verifies: these seeds exercise
    the refusal path. Accepted authenticated streams come from the fuzz target's round-trip modes,
    which seal with EnvelopeSealer itself."""
    header = struct.pack("<BBHIQ", 1, 0, 0, len(payload), padding)
    tail = b"" if seq is None else mac(ENVELOPE_KEY, struct.pack("<Q", seq), header, payload)[:16]
    return header + payload + bytes(padding) + tail


def stream(items, authenticated):
    return b"".join(envelope(p, pad, i if authenticated else None) for i, (p, pad) in enumerate(items))


def literal(payload, padding=0):
    """A round-trip record with literal payload bytes (ctl bit 0 clear)."""
    assert len(payload) < 256
    ctl = 0
    tail = b""
    if padding > 255:
        ctl |= 2
        tail = struct.pack("<H", padding)
    elif padding:
        ctl |= 4
        tail = struct.pack("<B", padding)
    return bytes([ctl, len(payload)]) + payload + tail


def pattern(half_length, odd=False, padding=0):
    """A round-trip record with a generated payload of 2 * half_length (+1) bytes."""
    ctl = 1 | (0x80 if odd else 0)
    tail = b""
    if padding > 255:
        ctl |= 2
        tail = struct.pack("<H", padding)
    elif padding:
        ctl |= 4
        tail = struct.pack("<B", padding)
    return bytes([ctl]) + struct.pack("<H", half_length) + tail


SMALL = [(b"hello", 0), (b"", 3), (bytes(range(100)), 0), (b"x" * 40, 17)]


def envelope_seeds():
    seeds = {}
    seeds["decode-trusted"] = bytes([0, SEVEN_BYTES, LIMIT_1MIB]) + stream(SMALL, False)
    seeds["decode-authenticated"] = bytes([1, VARYING_61, LIMIT_1MIB]) + stream(SMALL, True)
    seeds["decode-authenticated-push-zero-commits"] = bytes([1 | 4 | 16, ONE_BYTE, LIMIT_1MIB]) + stream(SMALL[:2], True)
    seeds["decode-trusted-partial"] = bytes([0, WHOLE, LIMIT_1MIB]) + stream(SMALL[:1], False) + envelope(b"abcdef")[:11]
    seeds["decode-over-limit"] = bytes([0, WHOLE, 4]) + stream([(b"sixteen bytes ok", 0), (b"seventeen bytes!!", 0)], False)
    records = literal(b"abc") + pattern(12000) + literal(b"", 300) + pattern(40000, True, 5) + literal(b"last", 1)
    seeds["round-trip-trusted"] = bytes([2, VARYING_4096, LIMIT_1MIB]) + records
    seeds["round-trip-authenticated"] = bytes([3, VARYING_61, LIMIT_1MIB]) + records
    seeds["round-trip-authenticated-direct"] = bytes([3 | 4, WHOLE, LIMIT_1MIB]) + pattern(50000) + pattern(9000)
    # Limit 2^10: 1024 bytes pass, 1025 are refused.
    seeds["round-trip-at-the-limit"] = bytes([3, SEVEN_BYTES, 10]) + pattern(512) + pattern(512, True)
    # One flip in the first payload (refused under the key), one in padding (harmless).
    flips = bytes([1]) + struct.pack("<IB", 16 + 1, 0x40)
    seeds["round-trip-tampered"] = bytes([3 | 8, SEVEN_BYTES, LIMIT_1MIB]) + flips + records
    flips = bytes([1]) + struct.pack("<IB", 16 + 3 + 16 + 16 + 10, 0xFF)  # inside the 300 padding bytes
    seeds["round-trip-padding-flip"] = bytes([3 | 8, VARYING_61, LIMIT_1MIB]) + flips + literal(b"abc") + literal(b"", 300)
    return seeds


# --- handshake (net/handshake.h) ---

def prefix(kind):
    return struct.pack("<IHBB", MAGIC, VERSION, kind, 0)


def hello(frm, incarnation, to, nonce):
    return prefix(1) + struct.pack("<QIIII", CLUSTER_ID, frm, incarnation, to, 0) + nonce


def challenge(hello_bytes, frm, incarnation, to, nonce):
    body = prefix(2) + struct.pack("<QIIII", CLUSTER_ID, frm, incarnation, to, 0) + nonce
    return body + mac(SECRET, b"dagsim challenge", hello_bytes, body)


def response(hello_bytes, challenge_bytes):
    return prefix(3) + mac(SECRET, b"dagsim response", hello_bytes, challenge_bytes)


def handshake_seeds():
    seeds = {}
    # Mode 0: a listener, worker 2 of 3 (size byte 1: 2 + 1), incarnation 5; the dialer is worker 0.
    h = hello(0, 11, 2, bytes(range(32)))
    c = challenge(h, 2, 5, 0, LISTENER_NONCE)
    listener = bytes([0, SEVEN_BYTES, 1, 2, 5])
    seeds["listener-hello"] = listener + h
    seeds["listener-established"] = listener + h + response(h, c)
    seeds["listener-established-then-frames"] = bytes([0, WHOLE, 1, 2, 5]) + h + response(h, c) + b"\x01" * 20
    seeds["listener-wrong-response"] = bytes([0, VARYING_61, 1, 2, 5]) + h + prefix(3) + bytes(32)
    # Mode 1: a dialer, worker 1 of 3, incarnation 4; target byte 0 picks worker (1 + 1 + 0) % 3 = 2.
    h = hello(1, 4, 2, DIALER_NONCE)
    dialer = bytes([1, ONE_BYTE, 1, 1, 0, 4])
    seeds["dialer-established"] = dialer + challenge(h, 2, 8, 1, bytes(range(100, 132)))
    seeds["dialer-established-then-frames"] = bytes([1, VARYING_61, 1, 1, 0, 4]) + challenge(h, 2, 8, 1, bytes(32)) + b"\x02" * 9
    seeds["dialer-wrong-worker-answers"] = dialer + challenge(h, 0, 8, 1, bytes(32))
    # Mode 2: dialer worker 3 of 5 reaching worker (3 + 1 + 2) % 5 = 1; nonces from the input.
    nonces = bytes(range(1, 65))

    def pair(chunk, flags, flips=()):
        body = bytes([2, chunk, 3, 3, 2, flags, len(flips)])
        for position, mask in flips:
            body += struct.pack("<HB", position, mask)
        return body + nonces

    seeds["pair-honest"] = pair(SEVEN_BYTES, 0)
    seeds["pair-honest-one-byte-reads"] = pair(ONE_BYTE, 0)
    seeds["pair-hello-flipped"] = pair(VARYING_61, 0, [(40, 0x01)])
    seeds["pair-challenge-mac-flipped"] = pair(WHOLE, 0, [(64 + 80, 0x80)])
    seeds["pair-response-flipped"] = pair(WHOLE, 0, [(199, 0x10)])
    seeds["pair-flips-cancel"] = pair(WHOLE, 0, [(70, 0x0F), (70, 0x0F)])
    seeds["pair-wrong-listener"] = pair(SEVEN_BYTES, 1)
    seeds["pair-other-secret"] = pair(SEVEN_BYTES, 2)
    seeds["pair-other-cluster"] = pair(SEVEN_BYTES, 4)
    seeds["pair-other-version"] = pair(SEVEN_BYTES, 8)
    return seeds


def store_delta_seeds():
    """store_delta_fuzz.cc: byte 0 the limit (0: production), u16 len(base), base, then the bytes
    tried both as a delta against base and as a target to make a delta to."""
    def records(ids, stamp=7):
        out = struct.pack("<I", len(ids))
        for i in ids:
            name = b"node%d" % i
            out += struct.pack("<I", len(name)) + name + struct.pack("<QQ", i, stamp)
        return out

    def varint(v):
        out = b""
        while v >= 0x80:
            out += bytes([(v & 0x7F) | 0x80])
            v >>= 7
        return out + bytes([v])

    def seed(limit, base, other):
        return bytes([limit]) + struct.pack("<H", len(base)) + base + other

    base = records(list(range(0, 60, 2)))
    joined = records(sorted(list(range(0, 60, 2)) + [31]))
    # A delta in the documented format: the first 40 bytes of base, then three literal bytes.
    delta = varint(43) + b"\x01" + varint(0) + varint(40) + b"\x02" + varint(3) + b"abc"
    return {
        "join-into-records": seed(0, base, joined),
        "stamps-rewritten": seed(0, base, records(list(range(0, 60, 2)), stamp=8)),
        "valid-delta": seed(0, base, delta),
        "delta-over-a-small-limit": seed(5, base, delta),
        "unrelated-bytes": seed(0, bytes(range(200)), bytes(reversed(range(200)))),
    }


def write(target, seeds):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    for name, data in sorted(seeds.items()):
        assert len(data) < 64 * 1024, name
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    print(f"{folder}: {len(seeds)} seeds, {sum(map(len, seeds.values()))} bytes")


if __name__ == "__main__":
    write("envelope", envelope_seeds())
    write("handshake", handshake_seeds())
    write("store_delta", store_delta_seeds())
