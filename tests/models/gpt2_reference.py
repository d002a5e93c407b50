#!/usr/bin/python3
"""Independent GPT-2 reference for tests/models/gpt2_golden_test.cpp.

Usage: gpt2_reference.py DIR

DIR/manifest.txt (written by the C++ test), one record per line:
  config <vocab_size> <n_positions> <n_embd> <n_layer> <n_head>
  input <B> <T>                       inputs in DIR/idx.bin, DIR/targets.bin (int64 LE, [B,T])
  param <name> <dim0> [<dim1>]        raw float32 LE in DIR/params/<name>.bin, torch layout
Writes DIR/ref/logits.bin ([B,T,V] float32), DIR/ref/loss.bin (1 float32) and
DIR/ref/grad/<name>.bin (float32, the parameter's shape) for every parameter.

Written from the GPT-2 paper / Hugging Face modeling_gpt2.py with explicit tensor ops (no
torch.nn modules), so it shares no code with the C++ model. Weights of c_attn, c_proj and c_fc
arrive in torch Linear layout [out, in] and are used as HF Conv1D does, x @ W^T-as-[in, out].
"""
import math
import os
import sys

try:
    import numpy as np
    import torch
except ImportError as e:  # the C++ test turns exit code 77 into GTEST_SKIP
    print(f"gpt2_reference.py: {e} (install python3-torch)")
    sys.exit(77)


def read_manifest(d):
    cfg, shape, params = None, None, []
    with open(os.path.join(d, "manifest.txt")) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "config":
                cfg = dict(zip(["vocab_size", "n_positions", "n_embd", "n_layer", "n_head"],
                               map(int, parts[1:])))
            elif parts[0] == "input":
                shape = (int(parts[1]), int(parts[2]))
            elif parts[0] == "param":
                params.append((parts[1], tuple(int(x) for x in parts[2:])))
    return cfg, shape, params


def load(path, dtype, shape):
    a = np.fromfile(path, dtype=dtype)
    assert a.size == math.prod(shape), f"{path}: {a.size} values, expected shape {shape}"
    return torch.from_numpy(a.reshape(shape).copy())


def layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)  # biased variance, as LayerNorm
    return (x - mu) / torch.sqrt(var + eps) * w + b


def conv1d(x, w_out_in, b):
    # HF Conv1D: x @ W + b with W stored [in, out]; ours arrives [out, in].
    w_in_out = w_out_in.t()
    return x @ w_in_out + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def attention(x, p, pre, n_head):
    bsz, t, c = x.shape
    hd = c // n_head
    qkv = conv1d(x, p[pre + "c_attn.weight"], p[pre + "c_attn.bias"])
    q, k, v = qkv[..., :c], qkv[..., c:2 * c], qkv[..., 2 * c:]
    q, k, v = (z.reshape(bsz, t, n_head, hd).permute(0, 2, 1, 3) for z in (q, k, v))
    att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
    keep = torch.tril(torch.ones(t, t, dtype=torch.bool))
    att = att.masked_fill(~keep, float("-inf"))
    att = torch.softmax(att, dim=-1)
    y = (att @ v).permute(0, 2, 1, 3).reshape(bsz, t, c)
    return conv1d(y, p[pre + "c_proj.weight"], p[pre + "c_proj.bias"])


def gpt2(idx, p, cfg):
    t = idx.shape[1]
    x = p["transformer.wte.weight"][idx] + p["transformer.wpe.weight"][:t]
    for i in range(cfg["n_layer"]):
        pre = f"transformer.h.{i}."
        x = x + attention(layer_norm(x, p[pre + "ln_1.weight"], p[pre + "ln_1.bias"]), p,
                          pre + "attn.", cfg["n_head"])
        h = layer_norm(x, p[pre + "ln_2.weight"], p[pre + "ln_2.bias"])
        h = gelu_tanh(conv1d(h, p[pre + "mlp.c_fc.weight"], p[pre + "mlp.c_fc.bias"]))
        x = x + conv1d(h, p[pre + "mlp.c_proj.weight"], p[pre + "mlp.c_proj.bias"])
    x = layer_norm(x, p["transformer.ln_f.weight"], p["transformer.ln_f.bias"])
    return x @ p["transformer.wte.weight"].t()  # tied lm head


def main():
    d = sys.argv[1]
    torch.set_num_threads(1)
    cfg, shape, specs = read_manifest(d)
    p = {}
    for name, s in specs:
        p[name] = load(os.path.join(d, "params", name + ".bin"), "<f4", s).requires_grad_(True)
    idx = load(os.path.join(d, "idx.bin"), "<i8", shape)
    targets = load(os.path.join(d, "targets.bin"), "<i8", shape)

    logits = gpt2(idx, p, cfg)
    flat = logits.reshape(-1, logits.shape[-1])
    loss = (torch.logsumexp(flat, dim=-1) - flat.gather(1, targets.reshape(-1, 1))[:, 0]).mean()
    loss.backward()

    out = os.path.join(d, "ref")
    os.makedirs(os.path.join(out, "grad"), exist_ok=True)
    logits.detach().numpy().astype("<f4").tofile(os.path.join(out, "logits.bin"))
    np.array([loss.item()], dtype="<f4").tofile(os.path.join(out, "loss.bin"))
    for name, _ in specs:
        g = p[name].grad
        g = torch.zeros_like(p[name]) if g is None else g
        g.numpy().astype("<f4").tofile(os.path.join(out, "grad", name + ".bin"))


if __name__ == "__main__":
    main()
