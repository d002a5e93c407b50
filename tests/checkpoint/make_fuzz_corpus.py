#!/usr/bin/python3
"""Regenerates tests/checkpoint/fuzz_corpus/: seeds for fuzz_safetensors_header.

valid_* files must parse, bad_* files must be rejected with an IoError (fuzz_safetensors_replay
checks both). Run from anywhere: python3 tests/checkpoint/make_fuzz_corpus.py
"""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz_corpus")


def image(header_text, data=b"", pad=True):
    h = header_text.encode("utf-8") if isinstance(header_text, str) else header_text
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def dumps(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def all_dtypes():
    sizes = [("F64", 8), ("F32", 4), ("F16", 2), ("BF16", 2), ("I64", 8), ("I32", 4), ("I16", 2),
             ("I8", 1), ("U8", 1), ("BOOL", 1)]
    header, off = {"__metadata__": {"step": "10", "note": "\u00fc\n"}}, 0
    for n, s in sizes:
        header[n.lower()] = entry(n, [2], off, off + 2 * s)
        off += 2 * s
    return image(dumps(header), bytes(range(off)))


A = '"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}'
SEEDS = {
    "valid_empty": image("{}"),
    "valid_metadata_only": image(dumps({"__metadata__": {"format": "pt"}})),
    "valid_one_f32": image("{" + A + "}", bytes(8)),
    "valid_all_dtypes": all_dtypes(),
    "valid_scalar_and_empty": image(dumps({"s": entry("F32", [], 0, 4), "e": entry("I64", [0], 4, 4),
                                           "z": entry("F16", [3, 0, 2], 4, 4)}), bytes(4)),
    "valid_out_of_order_unpadded": image(dumps({"b": entry("U8", [2], 4, 6), "a": entry("U8", [2, 2], 0, 4)}),
                                         bytes(6), pad=False),
    # Found by the fuzzer: a valid empty tensor whose running element product overflows int64.
    "valid_huge_dims_with_zero": image(dumps({"a": entry("U8", [424294967296429, 96729, 0], 0, 0)})),
    "bad_short": b"\x08\x00\x00",
    "bad_length_huge": struct.pack("<Q", 1234567890123) + b"{}",
    "bad_length_zero": struct.pack("<Q", 0),
    "bad_utf8": image(b'{"\xff":1}'),
    "bad_not_json": image("{" + A, bytes(8)),
    "bad_root_array": image("[1,2]"),
    "bad_unknown_dtype": image(dumps({"a": entry("F128", [1], 0, 16)}), bytes(16)),
    "bad_negative_dim": image('{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}', bytes(1)),
    "bad_size_mismatch": image(dumps({"a": entry("F32", [2, 3], 0, 20)}), bytes(20)),
    "bad_overflow": image(dumps({"a": entry("U8", [2 ** 32, 2 ** 32, 2], 0, 0)})),
    "bad_overlap": image(dumps({"a": entry("U8", [8], 0, 8), "b": entry("U8", [4], 4, 8)}), bytes(8)),
    "bad_gap": image(dumps({"a": entry("U8", [4], 0, 4), "b": entry("U8", [2], 6, 8)}), bytes(8)),
    "bad_trailing_data": image("{" + A + "}", bytes(12)),
    "bad_duplicate_name": image("{" + A + "," + A + "}", bytes(8)),
    "bad_metadata_number": image('{"__metadata__":{"k":1}}'),
    "bad_extra_key": image('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":0}}', bytes(1)),
    "bad_deep_nesting": image("[" * 5000 + "]" * 5000),
}


os.makedirs(OUT, exist_ok=True)
for old in os.listdir(OUT):
    os.remove(os.path.join(OUT, old))
for name, data in sorted(SEEDS.items()):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print(f"{len(SEEDS)} seeds in {OUT}")
