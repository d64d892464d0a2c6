#!/usr/bin/env python3
"""Independent check of allow.hex: builds the three allow bodies of
raet-protocol.md §8.3 from the documented layout with the system libsodium
(through ctypes, no Python crypto package needed) and the same fixed inputs
as golden_test.go, then compares them with the sections of allow.hex.

Run from this directory: python3 libsodium_allow.py
It also shows two libsodium behaviours the Go code mirrors: a low-order
public key is refused (crypto_box_beforenm returns -1), and the top bit of
a public key is ignored.
"""
import ctypes
import ctypes.util
import struct
import sys

name = ctypes.util.find_library("sodium") or "libsodium.so.23"
na = ctypes.cdll.LoadLibrary(name)
na.sodium_version_string.restype = ctypes.c_char_p
assert na.sodium_init() >= 0


def pub_of(pri):
    out = ctypes.create_string_buffer(32)
    assert na.crypto_scalarmult_base(out, pri) == 0
    return out.raw


def box(msg, nonce, pub, pri):
    """crypto_box_easy: 16-byte Poly1305 tag, then the encrypted bytes."""
    out = ctypes.create_string_buffer(16 + len(msg))
    rc = na.crypto_box_easy(out, msg, ctypes.c_ulonglong(len(msg)), nonce, pub, pri)
    assert rc == 0, rc
    return out.raw


def beforenm(pub, pri):
    k = ctypes.create_string_buffer(32)
    return na.crypto_box_beforenm(k, pub, pri), k.raw


i_long = bytes.fromhex("fb47b518e7ecdc67b5a197a7f189c77ad0ffc71d302fb1f6a60aaab5e3bfb56c")
r_long = bytes.fromhex("8985d11cb2e2fecb083005f376c829b18d8f76ef7e22354a639e5682876562c5")
i_short = bytes.fromhex("211f3b713dfa4e8c79327b7a17a775eec955823d76af31047a5e0930eb0574f0")
r_short = bytes.fromhex("714f9552809f71545c6efe6b24a8e8b3d2a2e2e6c928f5920c748dc1e38e1f58")
I_LONG, R_LONG, I_SHORT, R_SHORT = map(pub_of, (i_long, r_long, i_short, r_short))
seid, deid, fqdn = 0x66, 0xCA, b"main.example.com"

rnd = bytes(range(5 * 24))
hello_nonce, oreo, cookie_nonce, vouch_nonce, init_nonce = (rnd[k:k + 24] for k in range(0, 120, 24))

plain = b"0" * 64
hello = plain + I_SHORT + box(plain, hello_nonce, R_LONG, i_short) + hello_nonce

cookie_stuff = R_SHORT + struct.pack(">II", seid, deid) + oreo
cookie = box(cookie_stuff, cookie_nonce, I_SHORT, r_long) + cookie_nonce

vouch = box(I_SHORT, vouch_nonce, R_LONG, i_long)
init_stuff = I_LONG + vouch + vouch_nonce + fqdn.ljust(128, b" ")[:128]
initiate = I_SHORT + oreo + box(init_stuff, init_nonce, R_SHORT, i_short) + init_nonce

assert (len(hello), len(cookie), len(initiate)) == (200, 104, 328)


def sections(path):
    out, cur = {}, None
    for line in open(path, encoding="utf-8"):
        if line.startswith("## "):
            cur = line[3:].split(" (")[0]
            out[cur] = b""
            continue
        data = line.split("#", 1)[0].replace(" ", "").strip()
        if data:
            out[cur] += bytes.fromhex(data)
    return out


golden = sections("allow.hex")
ok = True
for name, got in (("hello", hello), ("cookie", cookie), ("cookie stuff", cookie_stuff),
                  ("initiate", initiate), ("initiate stuff", init_stuff)):
    same = golden.get(name) == got
    ok &= same
    print(f"{name:15s} {len(got):3d} bytes  {'same as allow.hex' if same else 'DIFFERS'}")

low_order = bytes.fromhex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800")
print("beforenm with a low-order key returns", beforenm(low_order, r_long)[0])
flipped = I_SHORT[:31] + bytes([I_SHORT[31] ^ 0x80])
print("top bit of a public key ignored:", beforenm(flipped, r_long) == beforenm(I_SHORT, r_long))
print("libsodium", na.sodium_version_string().decode())
sys.exit(0 if ok else 1)
