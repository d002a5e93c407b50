#!/usr/bin/env python3
"""An independent reference for deepspeed.cpp's 1-bit optimizers (tests/optim/onebit_reference_test.cpp).

Re-derives DeepSpeed's OnebitAdam, ZeroOneAdam and OnebitLamb (deepspeed/runtime/fp16/onebit/) step
by step with torch tensor ops, every data-parallel rank simulated in this one process, including the
two-phase compressed all-reduce with worker and server error feedback (runtime/comm/nccl.py).

usage: onebit_reference.py DIR
  DIR/case.json     {"type", "world", "steps", "groups": [{"sizes": [...], "padded", "lr", "weight_decay"}],
                     "betas", "eps", the type's own keys}
  DIR/params.f32    the initial flat parameters, group after group (padded lengths)
  DIR/grads.f32     [steps][world] blocks of the same layout: rank r's gradient at each step
writes
  DIR/expected.f32  [world] blocks: each rank's final parameters, exp_avg, exp_avg_sq (group after group)
  DIR/reduced.json  per step, whether the engine all-reduced the gradients before it
"""
import json
import math
import os
import sys

import numpy as np
import torch


def divider(size):
    return size * 8 // math.gcd(size, 8)


def signs(x):
    # DeepSpeed: x.sign().add_(1).bool() -> +1 for x >= 0 (zero included), -1 below.
    return x.sign().add_(1).bool().float().add_(-0.5).mul_(2.0)


class Exchange:
    """compressed_allreduce over `world` simulated ranks, one tensor at a time (DeepSpeed's loop)."""

    def __init__(self, world):
        self.world = world
        self.worker = {}
        self.server = {}

    def reset(self):
        for d in (self.worker, self.server):
            for per_rank in d.values():
                for t in per_rank:
                    t.zero_()

    def run(self, key, tensors):
        """tensors[r]: rank r's 1-D fp32 tensor; returns the common result."""
        p = self.world
        n = tensors[0].numel()
        unit = p * divider(p)
        padded = n if n % unit == 0 else n + unit - n % unit
        chunk = padded // p
        if key not in self.worker:
            self.worker[key] = [torch.zeros(padded) for _ in range(p)]
            self.server[key] = [torch.zeros(chunk) for _ in range(p)]
        sign_list, scales = [], []
        for r in range(p):
            m = torch.cat([tensors[r], torch.zeros(padded - n)])
            m.add_(self.worker[key][r])
            scale = torch.norm(m) / np.sqrt(m.numel())
            s = signs(m)
            self.worker[key][r] = m - scale * s
            sign_list.append(s)
            scales.append(scale)
        out = torch.zeros(padded)
        for r in range(p):  # rank r serves chunk r
            c = torch.zeros(chunk)
            for j in range(p):
                c += sign_list[j][r * chunk:(r + 1) * chunk] * (scales[j] * (1.0 / p))
            c.add_(self.server[key][r])
            scale = torch.norm(c) / np.sqrt(c.numel())
            s = signs(c)
            self.server[key][r] = c - scale * s
            out[r * chunk:(r + 1) * chunk] = scale * s
        return out[:n]


def mean_grad(grads):
    acc = grads[0].clone()
    for g in grads[1:]:
        acc = acc + g
    return acc / len(grads)


class Param:
    def __init__(self, group, offset, numel, init, world):
        self.group, self.offset, self.numel = group, offset, numel
        self.p = [init.clone() for _ in range(world)]
        self.m = [torch.zeros(numel) for _ in range(world)]
        self.v = [torch.zeros(numel) for _ in range(world)]


def adam_update(m, v, p, eps, wd):
    u = m / (v.sqrt() + eps)
    if wd > 0.0:
        u += wd * p
    return u


def run_onebit_adam(case, params, grads_at, world, betas, eps, reduced):
    b1, b2 = betas
    ex = Exchange(world)
    frozen = False
    for step in range(1, case["steps"] + 1):
        reduced.append(not frozen)
        if step == 1:
            continue  # DeepSpeed's set-up step
        for k, q in enumerate(params):
            lr, wd = case["groups"][q.group]["lr"], case["groups"][q.group]["weight_decay"]
            g = grads_at(step, q)
            if not frozen:
                for r in range(world):
                    q.m[r].mul_(b1).add_(g[r], alpha=1 - b1)
                    q.v[r].mul_(b2).addcmul_(g[r], g[r], value=1 - b2)
            else:
                for r in range(world):
                    q.m[r].mul_(b1).add_(g[r], alpha=1 - b1)
                if world > 1:
                    common = ex.run(k, q.m)
                    q.m = [common.clone() for _ in range(world)]
            for r in range(world):
                q.p[r].add_(-lr * adam_update(q.m[r], q.v[r], q.p[r], eps, wd))
        if not frozen and step >= case["freeze_step"]:
            frozen = True


def run_zero_one_adam(case, params, grads_at, world, betas, eps, reduced):
    b1, b2 = betas
    ex = Exchange(world)
    frozen, reduce_next = False, True
    var_interval, var_counter, local_interval, local_counter = 1, 0, 1, 0
    acc = {k: [torch.zeros(q.numel) for _ in range(world)] for k, q in enumerate(params)}
    lrs = [0.0] * len(case["groups"])
    for step in range(1, case["steps"] + 1):
        reduced.append(reduce_next)
        if step == 1:
            continue
        variance_step = not frozen and step % var_interval == 0
        for k, q in enumerate(params):
            lr, wd = case["groups"][q.group]["lr"], case["groups"][q.group]["weight_decay"]
            g = grads_at(step, q)
            if not frozen and not variance_step and world > 1:
                common = ex.run(k, g)
                g = [common.clone() for _ in range(world)]
            for r in range(world):
                if variance_step:
                    q.v[r].mul_(b2).addcmul_(g[r], g[r], value=1 - b2)
                q.m[r].mul_(b1).add_(g[r], alpha=1 - b1)
                update = -lr * adam_update(q.m[r], q.v[r], q.p[r], eps, wd)
                q.p[r].add_(update)
                if frozen:
                    acc[k][r].add_(update)
        if frozen:
            for gi, grp in enumerate(case["groups"]):
                lrs[gi] += grp["lr"]
        if frozen and step % local_interval == 0:
            for k, q in enumerate(params):
                for r in range(world):
                    q.p[r].add_(-1 * acc[k][r])
                    acc[k][r].mul_(q.v[r].sqrt() + eps)
                if world > 1:
                    common = ex.run(k, acc[k])
                    acc[k] = [common.clone() for _ in range(world)]
                for r in range(world):
                    q.m[r].zero_().add_(acc[k][r] / lrs[q.group], alpha=-1)
                    q.p[r].add_(acc[k][r] / (q.v[r].sqrt() + eps))
                    acc[k][r].zero_()
            lrs = [0.0] * len(case["groups"])
        if not frozen:
            if variance_step:
                var_counter += 1
                if var_counter == case["var_update_scaler"]:
                    var_counter = 0
                    var_interval *= 2
            reduce_next = (step + 1) % var_interval == 0
        else:
            local_counter += 1
            if local_counter == case["local_step_scaler"]:
                local_counter = 0
                local_interval = min(case["local_step_clipper"], local_interval * 2)
        if not frozen and step > case["var_freeze_step"]:
            frozen, reduce_next = True, False
            ex.reset()


def run_onebit_lamb(case, params, grads_at, world, betas, eps, reduced):
    b1, b2 = betas
    ex = Exchange(world)
    frozen, scaled = False, False
    fresh = [[torch.zeros(q.numel) for _ in range(world)] for q in params]
    coeff_freeze = [0.0] * len(params)
    last_factor = [1.0] * len(params)
    scaling = [1.0] * len(params)
    for step in range(1, case["steps"] + 1):
        reduced.append(not frozen)
        if step == 1:
            continue
        if not frozen:
            for k, q in enumerate(params):
                lr, wd = case["groups"][q.group]["lr"], case["groups"][q.group]["weight_decay"]
                g = grads_at(step, q)
                for r in range(world):
                    q.m[r].mul_(b1).add_(g[r], alpha=1 - b1)
                    q.v[r].mul_(b2).addcmul_(g[r], g[r], value=1 - b2)
                    if step == case["freeze_step"]:
                        fresh[k][r] = q.v[r].clone()
                    weight_norm = q.p[r].pow(2).sum().sqrt()
                    update = adam_update(q.m[r], q.v[r], q.p[r], eps, wd)
                    update_norm = update.pow(2).sum().sqrt()
                    coeff = 1.0
                    if weight_norm != 0 and update_norm != 0:
                        coeff = min(max((weight_norm / update_norm).item(), case["min_coeff"]), case["max_coeff"])
                    if r == 0 and coeff != 1.0:
                        coeff_freeze[k] = case["coeff_beta"] * coeff_freeze[k] + (1 - case["coeff_beta"]) * coeff
                    q.p[r].add_(-lr * coeff * update)
            if step >= case["freeze_step"]:
                frozen = True
            continue
        last = [[q.m[r].clone() for r in range(world)] for q in params]
        if not scaled:
            rms = [(torch.norm(q.m[0]) / np.sqrt(q.numel)).item() for q in params]
            united = sum(rms) / len(rms)
            scaling = [united / x if x > 0 else 1.0 for x in rms]
            scaled = True
        for k, q in enumerate(params):
            g = grads_at(step, q)
            for r in range(world):
                q.m[r].mul_(b1).add_(g[r], alpha=1 - b1)
                q.m[r].mul_(scaling[k])
        if world > 1:  # one tensor: every parameter's momentum, concatenated in model order
            common = ex.run("flat", [torch.cat([q.m[r] for q in params]) for r in range(world)])
            at = 0
            for q in params:
                q.m = [common[at:at + q.numel].clone() for _ in range(world)]
                at += q.numel
        for k, q in enumerate(params):
            lr, wd = case["groups"][q.group]["lr"], case["groups"][q.group]["weight_decay"]
            factor_r = None
            for r in range(world):
                q.m[r].div_(scaling[k])
                rec = (q.m[r] - last[k][r] * b1) / (1 - b1)
                fresh[k][r].mul_(b2).addcmul_(rec, rec, value=1 - b2)
                denom = q.v[r].sqrt() + eps
                prelim = q.m[r] / denom
                update = prelim + wd * q.p[r] if wd > 0.0 else prelim
                update_norm = update.pow(2).sum().sqrt()
                factor = (denom / (fresh[k][r].sqrt() + eps)).max().item()
                if wd > 0.0:
                    ratio = min(1.0, (prelim.pow(2).sum().sqrt() / update_norm).item())
                    factor = factor * ratio + (1.0 - ratio)
                factor = min(max(factor, case["factor_min"]), case["factor_max"])
                factor = min(max(factor, last_factor[k] * (1.0 - case["factor_threshold"])),
                             last_factor[k] * (1.0 + case["factor_threshold"]))
                if r == 0:
                    factor_r = factor
                q.p[r].add_(-lr * (coeff_freeze[k] * factor) * update)
            last_factor[k] = factor_r


def main():
    d = sys.argv[1]
    case = json.load(open(os.path.join(d, "case.json")))
    world, steps = case["world"], case["steps"]
    torch.set_num_threads(1)
    layout = []  # (group, offset within the flat file, numel)
    flat = 0
    for gi, grp in enumerate(case["groups"]):
        off = 0
        for n in grp["sizes"]:
            layout.append((gi, flat + off, n))
            off += n
        flat += grp["padded"]
    init = torch.from_numpy(np.fromfile(os.path.join(d, "params.f32"), dtype=np.float32))
    grads = torch.from_numpy(np.fromfile(os.path.join(d, "grads.f32"), dtype=np.float32)).view(steps, world, flat)
    params = [Param(g, off, n, init[off:off + n], world) for g, off, n in layout]
    reduced = []

    def grads_at(step, q):
        """Rank r's gradient of q at `step` (1-based) as the optimizer receives it."""
        local = [grads[step - 1, r, q.offset:q.offset + q.numel].clone() for r in range(world)]
        if reduced[step - 1]:
            avg = mean_grad(local)
            return [avg.clone() for _ in range(world)]
        return local

    runner = {"OneBitAdam": run_onebit_adam, "ZeroOneAdam": run_zero_one_adam, "OneBitLamb": run_onebit_lamb}
    runner[case["type"]](case, params, grads_at, world, case["betas"], case["eps"], reduced)
    out = np.zeros((world, 3, flat), dtype=np.float32)
    for q in params:
        for r in range(world):
            out[r, 0, q.offset:q.offset + q.numel] = q.p[r].numpy()
            out[r, 1, q.offset:q.offset + q.numel] = q.m[r].numpy()
            out[r, 2, q.offset:q.offset + q.numel] = q.v[r].numpy()
    out.tofile(os.path.join(d, "expected.f32"))
    json.dump(reduced, open(os.path.join(d, "reduced.json"), "w"))


if __name__ == "__main__":
    main()
