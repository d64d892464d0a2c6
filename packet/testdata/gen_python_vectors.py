#!/usr/bin/env python3
"""Regenerates the Python-made body vectors used by body_test.go.

Run from packet/testdata with Python 3 and msgpack-python 1.0 (Debian:
python3-msgpack): python3 gen_python_vectors.py. The samples must match the
Go values built in body_test.go.
"""
import json
from collections import OrderedDict as od

import msgpack

ordered = od([
    ("name", "Zoë"),
    ("emoji", "😀 ok"),
    ("ctl", "\x00\x1f\x7f\b\f\n\r\t\"\\/"),
    ("html", "<a href='x'>&</a>"),
    ("floats", [1.0, 1e16, 1e-05, 0.0001, -0.0, 1.5, 123456789012345678.0, 0.1,
                9999999999999998.0, 1e-7, 2.5e-5, 1e22, 5e-324]),
    ("ints", [0, -1, 9223372036854775807, 18446744073709551615,
              -9223372036854775808, 123456789012345678901234567890]),
    ("nested", od([("b", True), ("a", None), ("z", [])])),
    ("sep", "\u2028\u2029"),
    ("empty", od()),
])
unordered = {"zeta": 1, "alpha": "β", "mid": [1, 2], "Upper": None}
packed = od([
    ("subject", "hello main"), ("n", 1), ("neg", -33), ("big", 2**40), ("f", 1.5),
    ("bytes", b"\x00\xff"), ("list", [1, "two", None, True, False]),
    ("nested", od([("k", "é")])), ("long", "x" * 40), ("u64", 2**64 - 1), ("i8", -100),
])


def write(name, data):
    with open(name, "wb") as f:
        f.write(data)


# What the reference writes for a json body (raet/road/packeting.py).
write("json_ordered.golden", json.dumps(ordered, separators=(",", ":")).encode())
write("json_sorted.golden", json.dumps(unordered, separators=(",", ":"), sort_keys=True).encode())
# msgpack-python 1.0 defaults (str type, bin type), and the old format of
# raet before 2020 (no bin type: str and bytes both as raw).
write("msgpack_current.golden", msgpack.packb(packed))
write("msgpack_old_raw.golden", msgpack.packb(packed, use_bin_type=False))
