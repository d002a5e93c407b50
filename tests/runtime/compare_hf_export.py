#!/usr/bin/python3
"""Checks a ds-zero-to-fp32 export against the engine's parameters with an independent reader.

Usage: compare_hf_export.py EXPORT.safetensors ENGINE_PARAMS.safetensors

Both files are parsed here with json + numpy only (the safetensors format: u64 header length,
JSON header, raw little-endian data). The export is in Hugging Face GPT-2 layout, whose Conv1D
weights are the transpose of the engine's Linear weights. Exit 0 when every tensor is equal,
1 otherwise, 77 when numpy is missing.
"""
import json
import struct
import sys

try:
    import numpy as np
except ImportError:
    sys.exit(77)

DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64, "U8": np.uint8}
CONV1D = (".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight")


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
    return out


export, engine = read(sys.argv[1]), read(sys.argv[2])
bad = 0
for name, want in engine.items():
    got = export.get(name)
    if got is None:
        print(f"{name}: missing from the export")
        bad += 1
        continue
    if name.endswith(CONV1D):
        got = got.T
    if got.shape != want.shape or not np.array_equal(got, want):
        print(f"{name}: differs (export {got.shape}, engine {want.shape})")
        bad += 1
print(f"compare_hf_export: {len(engine)} tensors, {bad} different")
sys.exit(1 if bad else 0)
