#!/usr/bin/python3
"""benchmarks/gpt2_step's reference: the same GPT-2 training step in plain Python PyTorch.

Usage: gpt2_step_reference.py WEIGHTS BATCHES N_HEAD WARMUP STEPS THREADS DTYPE
WEIGHTS is a safetensors file of the C++ model's parameters (its names, torch Linear layout
[out, in]); BATCHES holds "input_ids" int64 [warmup + steps, B, T]. The model is GPT-2 written the
way a PyTorch user writes it (torch.nn.functional's linear, layer_norm, gelu and cross_entropy; the
tied head), trained with torch.optim.AdamW and clip_grad_norm_ as the C++ side's config says.
DTYPE fp32 runs in fp32; bf16 runs under torch.autocast(cpu, bfloat16), PyTorch's own bf16 recipe.
Prints "RESULT <tokens/s of the fastest measured step> <first loss>" (the fastest step: on a shared
machine the slow ones measure the neighbours).
"""
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models"))
import hf_reference as ref  # noqa: E402  (its safetensors reader)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def attention(x, p, pre, n_head):
    b, t, c = x.shape
    q, k, v = F.linear(x, p[pre + "c_attn.weight"], p[pre + "c_attn.bias"]).split(c, dim=2)
    q, k, v = (z.view(b, t, n_head, c // n_head).transpose(1, 2) for z in (q, k, v))
    att = (q @ k.transpose(-2, -1)) / math.sqrt(c // n_head)
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    att = torch.softmax(att.masked_fill(future, float("-inf")), dim=-1)
    y = (att @ v).transpose(1, 2).reshape(b, t, c)
    return F.linear(y, p[pre + "c_proj.weight"], p[pre + "c_proj.bias"])


def gpt2(idx, p, n_layer, n_head):
    c = p["transformer.wte.weight"].shape[1]
    x = F.embedding(idx, p["transformer.wte.weight"]) + p["transformer.wpe.weight"][: idx.shape[1]]
    for i in range(n_layer):
        pre = f"transformer.h.{i}."
        ln = lambda z, n: F.layer_norm(z, (c,), p[pre + n + ".weight"], p[pre + n + ".bias"], 1e-5)  # noqa: E731
        x = x + attention(ln(x, "ln_1"), p, pre + "attn.", n_head)
        h = F.gelu(F.linear(ln(x, "ln_2"), p[pre + "mlp.c_fc.weight"], p[pre + "mlp.c_fc.bias"]), approximate="tanh")
        x = x + F.linear(h, p[pre + "mlp.c_proj.weight"], p[pre + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (c,), p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], 1e-5)
    return F.linear(x, p["transformer.wte.weight"])  # tied head


def main():
    weights, batches, n_head = sys.argv[1], sys.argv[2], int(sys.argv[3])
    warmup, steps, threads, dtype = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
    torch.set_num_threads(threads)
    params = {name: t.float().requires_grad_(True) for name, t in ref.read_safetensors(weights)[0].items()}
    n_layer = len({n.split(".")[2] for n in params if n.startswith("transformer.h.")})
    ids = ref.read_safetensors(batches)[0]["input_ids"]
    opt = torch.optim.AdamW(list(params.values()), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    first, best = None, float("inf")
    for s in range(warmup + steps):
        t0 = time.perf_counter()
        idx = ids[s]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            logits = gpt2(idx, params, n_layer, n_head)
        loss = F.cross_entropy(logits.float().flatten(0, 1), idx.flatten())  # next-token-free: labels = inputs
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        opt.step()
        if first is None:
            first = loss.item()
        if s >= warmup:
            best = min(best, time.perf_counter() - t0)
    print(f"RESULT {ids.shape[1] * ids.shape[2] / best:.3f} {first:.6f}")


if __name__ == "__main__":
    main()
