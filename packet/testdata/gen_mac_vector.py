#!/usr/bin/env python3
"""Independent computation of the MAC foot known-answer test in foot_test.go
(TestMACFootKnownAnswer), from the description in foot.go (MACFoot).

Needs PyNaCl (Debian: python3-nacl) for crypto_box_beforenm.
"""
import hashlib
import hmac

import nacl.bindings as nb


def hkdf_sha256(secret, info, n=32):
    prk = hmac.new(b"\x00" * 32, secret, hashlib.sha256).digest()  # no salt
    out, t, i = b"", b"", 1
    while len(out) < n:
        t = hmac.new(prk, t + info + bytes([i]), hashlib.sha256).digest()
        out += t
        i += 1
    return out[:n]


# Short-term keys of raet-protocol.md §7.4.
other_pri = bytes.fromhex("211f3b713dfa4e8c79327b7a17a775eec955823d76af31047a5e0930eb0574f0")
other_pub = bytes.fromhex("ea798c24f06f4436d8adc1327ff28506fcfa4cfde84c7b37ff677d30935c9163")
main_pub = bytes.fromhex("799a4818ec3d54dae1fb3122cf2cd18c4a7aeb5f25a17fe33576730cbaf6be7a")

shared = nb.crypto_box_beforenm(main_pub, other_pri)
# Direction other -> main: sender's public key first.
key = hkdf_sha256(shared, b"raet-go mac foot v1\x00" + other_pub + main_pub)
packet = b"ri RAET\npl 003d\nhl 2d\nfg 00\nbk 1\nfk 4\nfl 10\n\n"  # head, empty coat
print(hmac.new(key, packet, hashlib.sha256).hexdigest()[:32])
