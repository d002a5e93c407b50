#!/usr/bin/python3
"""Independent reference for tests/models/hf_golden_test.cpp: Llama / Mistral / Qwen2 / OPT causal LMs
computed the way Hugging Face transformers computes them, with explicit tensor ops.

Usage: hf_reference.py CASE_DIR [CASE_DIR ...]

Each CASE_DIR holds what the C++ test wrote with save_pretrained: config.json, model.safetensors
(or model.safetensors.index.json + shards), and inputs.safetensors (input_ids, labels: int64 [B,T]).
Writes CASE_DIR/ref.safetensors: "logits" [B,T,V], "loss" [1], and "grad/<name>" for every tensor
in the model files (float32).

Written from transformers' modeling_llama.py / modeling_mistral.py / modeling_qwen2.py /
modeling_opt.py and modeling_rope_utils.py. It shares no code with the C++ models: weights and
configuration come from the files exactly as transformers would read them (the safetensors parser
is here too), so it also checks that save_pretrained writes what HF reads.
"""
import json
import math
import os
import struct
import sys

try:
    import torch
except ImportError as e:  # the C++ test turns exit code 77 into GTEST_SKIP
    print(f"hf_reference.py: {e} (install python3-torch)")
    sys.exit(77)

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
          "I64": torch.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dt = DTYPES[info["dtype"]]
        buf = bytearray(data[base + begin:base + end])
        t = torch.frombuffer(buf, dtype=dt) if buf else torch.empty(0, dtype=dt)
        out[name] = t.reshape(info["shape"]).clone()
    return out, header.get("__metadata__", {})


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        b = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def load_weights(d):
    """As transformers does: the index if there is one, else model.safetensors; format must be pt."""
    index = os.path.join(d, "model.safetensors.index.json")
    files = [os.path.join(d, "model.safetensors")]
    if os.path.exists(index):
        with open(index) as f:
            files = sorted({os.path.join(d, v) for v in json.load(f)["weight_map"].values()})
    weights = {}
    for path in files:
        tensors, meta = read_safetensors(path)
        assert meta.get("format") == "pt", f"{path}: metadata format {meta.get('format')!r}, transformers wants 'pt'"
        weights.update(tensors)
    return weights


# ---------------------------------------------------------------- Llama family

def rope_inv_freq(cfg, head_dim, seq_len):
    """modeling_rope_utils: _compute_{default,linear_scaling,dynamic_ntk,llama3}_rope_parameters."""
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    base = cfg.get("rope_theta", 10000.0)
    dim = head_dim
    max_pos = cfg["max_position_embeddings"]
    if kind == "dynamic":
        factor = rs["factor"]
        seq_len = seq_len if seq_len > max_pos else max_pos
        base = base * ((factor * seq_len / max_pos) - (factor - 1)) ** (dim / (dim - 2))
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    if kind == "linear":
        inv_freq /= rs["factor"]
    if kind == "llama3":
        factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old_len = rs["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old_len / low, old_len / high
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        inv_freq = torch.where(medium, smoothed, scaled)
    return inv_freq


def rms_norm(x, w, eps):
    var = (x * x).mean(dim=-1, keepdim=True)
    return w * (x / torch.sqrt(var + eps))


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def attend(q, k, v, window, scale_q_first=False):
    """q [B,H,T,D], k/v [B,Hkv,T,D]. Causal; a window W keeps keys j with i - W < j <= i."""
    n_rep = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(n_rep, dim=1)
    v = v.repeat_interleave(n_rep, dim=1)
    t, d = q.shape[2], q.shape[3]
    if scale_q_first:  # OPT scales the queries before the product
        scores = (q * d ** -0.5) @ k.transpose(-1, -2)
    else:
        scores = (q @ k.transpose(-1, -2)) * d ** -0.5
    i = torch.arange(t)[:, None]
    j = torch.arange(t)[None, :]
    allowed = j <= i
    if window is not None:
        allowed = allowed & (i - j < window)
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores.float(), dim=-1) @ v


def embed_lookup(w, idx, pad):
    """nn.Embedding(padding_idx=pad): the pad row's value is used but gets no gradient from here."""
    if pad is None:
        return w[idx]
    pad = pad % w.shape[0]
    is_pad = torch.zeros(w.shape[0], 1)
    is_pad[pad] = 1.0
    return (w * (1 - is_pad) + w.detach() * is_pad)[idx]


def linear(x, p, name):
    y = x @ p[name + ".weight"].t()
    return y + p[name + ".bias"] if name + ".bias" in p else y


def llama(idx, p, cfg):
    kind = cfg["model_type"]
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    eps = cfg["rms_norm_eps"]
    bsz, t = idx.shape
    inv_freq = rope_inv_freq(cfg, head_dim, t)
    angles = torch.arange(t).float()[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    cos, sin = angles.cos(), angles.sin()

    x = embed_lookup(p["model.embed_tokens.weight"], idx, cfg.get("pad_token_id"))
    for layer in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{layer}."
        window = None
        if kind == "mistral":
            window = cfg.get("sliding_window")
        elif kind == "qwen2" and cfg.get("use_sliding_window") and layer >= cfg["max_window_layers"]:
            window = cfg.get("sliding_window")
        h = rms_norm(x, p[pre + "input_layernorm.weight"], eps)
        q = linear(h, p, pre + "self_attn.q_proj").view(bsz, t, heads, head_dim).transpose(1, 2)
        k = linear(h, p, pre + "self_attn.k_proj").view(bsz, t, kv_heads, head_dim).transpose(1, 2)
        v = linear(h, p, pre + "self_attn.v_proj").view(bsz, t, kv_heads, head_dim).transpose(1, 2)
        y = attend(rotate(q, cos, sin), rotate(k, cos, sin), v, window)
        x = x + linear(y.transpose(1, 2).reshape(bsz, t, heads * head_dim), p, pre + "self_attn.o_proj")
        h = rms_norm(x, p[pre + "post_attention_layernorm.weight"], eps)
        gate = linear(h, p, pre + "mlp.gate_proj")
        x = x + linear(gate * torch.sigmoid(gate) * linear(h, p, pre + "mlp.up_proj"), p, pre + "mlp.down_proj")
    x = rms_norm(x, p["model.norm.weight"], eps)
    head = p["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else p["lm_head.weight"]
    return x @ head.t()


# ---------------------------------------------------------------- OPT

def layer_norm(x, p, name):
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    y = (x - mu) / torch.sqrt(var + 1e-5)
    if name + ".weight" in p:
        y = y * p[name + ".weight"] + p[name + ".bias"]
    return y


def opt(idx, p, cfg):
    pre = "model.decoder."
    heads = cfg["num_attention_heads"]
    c = cfg["hidden_size"]
    pre_ln = cfg.get("do_layer_norm_before", True)
    project = cfg.get("word_embed_proj_dim", c) != c
    bsz, t = idx.shape
    x = embed_lookup(p[pre + "embed_tokens.weight"], idx, cfg.get("pad_token_id", 1))
    if project:
        x = x @ p[pre + "project_in.weight"].t()
    x = x + p[pre + "embed_positions.weight"][torch.arange(t) + 2]  # OPT's offset of 2
    for layer in range(cfg["num_hidden_layers"]):
        lp = f"{pre}layers.{layer}."
        residual = x
        h = layer_norm(x, p, lp + "self_attn_layer_norm") if pre_ln else x
        split = lambda z: z.view(bsz, t, heads, c // heads).transpose(1, 2)  # noqa: E731
        y = attend(split(linear(h, p, lp + "self_attn.q_proj")), split(linear(h, p, lp + "self_attn.k_proj")),
                   split(linear(h, p, lp + "self_attn.v_proj")), None, scale_q_first=True)
        x = residual + linear(y.transpose(1, 2).reshape(bsz, t, c), p, lp + "self_attn.out_proj")
        if not pre_ln:
            x = layer_norm(x, p, lp + "self_attn_layer_norm")
        residual = x
        h = layer_norm(x, p, lp + "final_layer_norm") if pre_ln else x
        h = linear(torch.relu(linear(h, p, lp + "fc1")), p, lp + "fc2")
        x = residual + h
        if not pre_ln:
            x = layer_norm(x, p, lp + "final_layer_norm")
    if pre_ln and not cfg.get("_remove_final_layer_norm", False):
        x = layer_norm(x, p, pre + "final_layer_norm")
    if project:
        x = x @ p[pre + "project_out.weight"].t()
    head = p[pre + "embed_tokens.weight"] if cfg.get("tie_word_embeddings", True) else p["lm_head.weight"]
    return x @ head.t()


def causal_lm_loss(logits, labels):
    """transformers' ForCausalLMLoss: shift by one, ignore -100, mean over the rest."""
    v = logits.shape[-1]
    lg = logits[:, :-1].reshape(-1, v).float()
    lb = labels[:, 1:].reshape(-1)
    keep = lb != -100
    lg, lb = lg[keep], lb[keep]
    return (torch.logsumexp(lg, dim=-1) - lg.gather(1, lb[:, None])[:, 0]).mean()


def run_case(d):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    p = {name: t.float().requires_grad_(True) for name, t in load_weights(d).items()}
    inputs, _ = read_safetensors(os.path.join(d, "inputs.safetensors"))
    kind = cfg["model_type"]
    if kind in ("llama", "mistral", "qwen2"):
        logits = llama(inputs["input_ids"], p, cfg)
    elif kind == "opt":
        logits = opt(inputs["input_ids"], p, cfg)
    else:
        raise SystemExit(f"hf_reference.py: no reference for model_type {kind}")
    loss = causal_lm_loss(logits, inputs["labels"])
    loss.backward()
    out = {"logits": logits, "loss": loss.reshape(1)}
    for name, t in p.items():
        out["grad/" + name] = t.grad if t.grad is not None else torch.zeros_like(t)
    write_safetensors(os.path.join(d, "ref.safetensors"), out)


def main():
    torch.set_num_threads(1)
    for d in sys.argv[1:]:
        run_case(d)


if __name__ == "__main__":
    main()
