#!/usr/bin/env python3
"""Independent check of a PEFT LoRA adapter folder (no torch, no safetensors module needed):
adapter_model.safetensors parsed by hand (8-byte little-endian header length + JSON), its keys in
PEFT's spelling, and adapter_config.json holding PEFT's LoraConfig fields.
Usage: peft_adapter_check.py DIR EXPECTED_KEYS_FILE   (exit 0 = ok, 1 = mismatch, printed)."""
import json, os, struct, sys

# The fields PEFT (0.13) writes for a LoraConfig, from peft/tuners/lora/config.py + PeftConfig.
PEFT_LORA_FIELDS = {
    "alpha_pattern", "auto_mapping", "base_model_name_or_path", "bias", "fan_in_fan_out",
    "inference_mode", "init_lora_weights", "layer_replication", "layers_pattern", "layers_to_transform",
    "loftq_config", "lora_alpha", "lora_dropout", "megatron_config", "megatron_core", "modules_to_save",
    "peft_type", "r", "rank_pattern", "revision", "target_modules", "task_type", "use_dora", "use_rslora",
}

def fail(msg):
    print("peft_adapter_check: " + msg)
    sys.exit(1)

def main():
    folder, expected_file = sys.argv[1], sys.argv[2]
    with open(os.path.join(folder, "adapter_config.json")) as f:
        cfg = json.load(f)
    missing = PEFT_LORA_FIELDS - cfg.keys()
    extra = cfg.keys() - PEFT_LORA_FIELDS
    if missing or extra:
        fail(f"config fields differ from PEFT's: missing {sorted(missing)}, extra {sorted(extra)}")
    if cfg["peft_type"] != "LORA" or cfg["task_type"] != "CAUSAL_LM" or not isinstance(cfg["r"], int):
        fail(f"peft_type/task_type/r: {cfg['peft_type']} {cfg['task_type']} {cfg['r']!r}")
    path = os.path.join(folder, "adapter_model.safetensors")
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    if meta.get("format") != "pt":
        fail(f"__metadata__ format is {meta.get('format')!r}, transformers/PEFT want 'pt'")
    with open(expected_file) as f:
        expected = [line.strip() for line in f if line.strip()]
    if sorted(header) != sorted(expected):
        fail(f"keys differ: file-only {sorted(set(header) - set(expected))}, expected-only {sorted(set(expected) - set(header))}")
    r = cfg["r"]
    end = 0
    for key, info in header.items():
        if not key.startswith("base_model.model.") or not (key.endswith(".lora_A.weight") or key.endswith(".lora_B.weight")):
            fail(f"'{key}' is not a PEFT LoRA key")
        if info["dtype"] != "F32" or len(info["shape"]) != 2:
            fail(f"'{key}': {info}")
        rows, cols = info["shape"]
        if (key.endswith("lora_A.weight") and rows != r) or (key.endswith("lora_B.weight") and cols != r):
            fail(f"'{key}' shape {info['shape']} does not have r={r}")
        end = max(end, info["data_offsets"][1])
    if 8 + n + end != len(data):
        fail(f"data section is {len(data) - 8 - n} bytes, tensors cover {end}")
    print(f"peft_adapter_check: ok ({len(header)} tensors, r={r}, targets {cfg['target_modules']})")

main()
