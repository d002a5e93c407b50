#!/usr/bin/python3
"""benchmarks/llama_step's reference: the same Llama-family training step in plain Python PyTorch.

Usage: llama_step_reference.py MODEL_DIR BATCHES WARMUP STEPS THREADS
MODEL_DIR holds config.json + model.safetensors (save_pretrained); BATCHES a safetensors file with
"input_ids" int64 [warmup + steps, B, T]. The model is tests/models/hf_reference.py's independent
Llama (transformers' eager ops, written out), trained with torch.optim.AdamW and clip_grad_norm_
as the C++ side's config says. Prints "RESULT <tokens/s of the fastest measured step> <first loss>"
(the fastest step: on a shared machine the slow ones measure the neighbours).
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models"))
import hf_reference as ref  # noqa: E402
import torch  # noqa: E402


def main():
    model_dir, batches = sys.argv[1], sys.argv[2]
    warmup, steps, threads = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(threads)
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    params = {name: t.float().requires_grad_(True) for name, t in ref.load_weights(model_dir).items()}
    ids = ref.read_safetensors(batches)[0]["input_ids"]
    opt = torch.optim.AdamW(list(params.values()), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    first, best = None, float("inf")
    for s in range(warmup + steps):
        t0 = time.perf_counter()
        idx = ids[s]
        opt.zero_grad(set_to_none=True)
        loss = ref.causal_lm_loss(ref.llama(idx, params, cfg), idx)
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
