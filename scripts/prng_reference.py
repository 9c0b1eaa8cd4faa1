#!/usr/bin/env python3
"""An independent transcription of dagsim's Prng continuous draws (core/base/prng.cc and
core/base/prng_math.cc), operation for operation, in Python's IEEE-754 doubles (each operation a
separate rounding: no fused multiply-add). It prints the golden values of prng_test.cc; that a
different language and runtime gives the same bits is the evidence that the draws depend on
nothing but IEEE-754 basic arithmetic. Usage: scripts/prng_reference.py [SEED] [COUNT]  (prng_test.cc uses 2026 8)"""
import math
import struct
import sys

MASK = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & MASK


def bits_of(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def double_of(b):
    return struct.unpack("<d", struct.pack("<Q", b))[0]


h = float.fromhex
LN2_HI, LN2_LO = h("0x1.62e42fefa3800p-1"), h("0x1.ef35793c76730p-45")
SQRT2, TWO_PI = h("0x1.6a09e667f3bcdp+0"), h("0x1.921fb54442d18p+2")
LOG_C = [h(s) for s in ("0x1.5555555555555p-1", "0x1.999999999999ap-2", "0x1.2492492492492p-2",
                        "0x1.c71c71c71c71cp-3", "0x1.745d1745d1746p-3", "0x1.3b13b13b13b14p-3",
                        "0x1.1111111111111p-3", "0x1.e1e1e1e1e1e1ep-4", "0x1.af286bca1af28p-4",
                        "0x1.8618618618618p-4")]
SIN_C = [h(s) for s in ("-0x1.5555555555555p-3", "0x1.1111111111111p-7", "-0x1.a01a01a01a01ap-13",
                        "0x1.71de3a556c734p-19", "-0x1.ae64567f544e4p-26", "0x1.6124613a86d09p-33",
                        "-0x1.ae7f3e733b81fp-41", "0x1.952c77030ad4ap-49")]
COS_C = [h(s) for s in ("-0x1.0000000000000p-1", "0x1.5555555555555p-5", "-0x1.6c16c16c16c17p-10",
                        "0x1.a01a01a01a01ap-16", "-0x1.27e4fb7789f5cp-22", "0x1.1eed8eff8d898p-29",
                        "-0x1.93974a8c07c9dp-37", "0x1.ae7f3e733b81fp-45", "-0x1.6827863b97d97p-53")]


def horner(z, coefficients):
    # c1 + z * (c2 + z * (... + z * cn)), innermost first, as the C++ writes it.
    acc = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        acc = c + z * acc
    return acc


def log(x):
    assert 0.0 < x <= sys.float_info.max
    bits = bits_of(x)
    exponent = -1023
    if bits >> 52 == 0:
        bits = bits_of(x * h("0x1p54"))
        exponent -= 54
    exponent += bits >> 52
    m = double_of((bits & ((1 << 52) - 1)) | (1023 << 52))
    if m > SQRT2:
        m *= 0.5
        exponent += 1
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    r = z * horner(z, LOG_C)
    hfsq = 0.5 * f * f
    e = float(exponent)
    return e * LN2_HI - ((hfsq - (s * (hfsq + r) + e * LN2_LO)) - f)


def sin_cos_turns(turns):
    assert 0.0 <= turns < 1.0
    quarter = int(turns * 4.0 + 0.5)
    rest = turns - float(quarter) * 0.25
    theta = rest * TWO_PI
    z = theta * theta
    s = theta + theta * (z * horner(z, SIN_C))
    c = 1.0 + z * horner(z, COS_C)
    return [(s, c), (c, -s), (-s, -c), (-c, s)][quarter & 3]


class Prng:
    def __init__(self, seed):
        s = seed & MASK
        self.state = []
        for _ in range(4):
            s, word = splitmix64(s)
            self.state.append(word)
        self.spare = None

    def next_u64(self):
        st = self.state
        result = (rotl((st[1] * 5) & MASK, 7) * 9) & MASK
        t = (st[1] << 17) & MASK
        st[2] ^= st[0]
        st[3] ^= st[1]
        st[1] ^= st[2]
        st[0] ^= st[3]
        st[2] ^= t
        st[3] = rotl(st[3], 45)
        return result

    def uniform_double(self):
        return float(self.next_u64() >> 11) * h("0x1.0p-53")

    def normal(self, mean=0.0, stddev=1.0):
        if self.spare is not None:
            spare, self.spare = self.spare, None
            return mean + stddev * spare
        u1 = self.uniform_double()
        while u1 <= 0.0:
            u1 = self.uniform_double()
        u2 = self.uniform_double()
        radius = math.sqrt(-2.0 * log(u1))
        sin, cos = sin_cos_turns(u2)
        self.spare = radius * sin
        return mean + stddev * radius * cos

    def exponential(self, mean):
        u = self.uniform_double()
        while u <= 0.0:
            u = self.uniform_double()
        return -mean * log(u)


def digest(seed, count):
    """FNV-1a over the bits of `count` (normal, exponential(1)) pairs: most of a last-place change
    in a coefficient shows only in a few draws in a thousand, so many draws are pinned at once."""
    p = Prng(seed)
    h = 0xCBF29CE484222325
    for _ in range(count):
        for x in (p.normal(), p.exponential(1.0)):
            h = ((h ^ bits_of(x)) * 0x100000001B3) & MASK
    return h


if __name__ == "__main__":
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 2026
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    p = Prng(seed)
    print("normal():", ", ".join(p.normal().hex() for _ in range(count)))
    print("normal(3, 2):", ", ".join(p.normal(3.0, 2.0).hex() for _ in range(count)))
    print("exponential(5):", ", ".join(p.exponential(5.0).hex() for _ in range(count)))
    print("digest(%d, 100000): 0x%016x" % (seed, digest(seed, 100000)))
