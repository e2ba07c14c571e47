#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""One rank of tools/compress-study (started by it, or by torchrun in the
CI check; not meant for hand use).

Trains an MLP on the handwritten digits python3-sklearn ships (1797 8x8
images: a fixed 70/30 split, standardised; each rank takes its own slice
of the training set) with DistributedDataParallel and one communication
METHOD (METHODS below), for a fixed number of epochs with a fixed seed.
Rank 0 evaluates test accuracy after each epoch.  Prints one JSON line:
per-epoch loss, accuracy and elapsed seconds, and the gradient bytes.

  --backend gloo   env:// rendezvous, gloo default group; tally reached
                   through TALLY_SOCKET (the study's emulated hosts)
  --backend tally  torchrun on one host; the tally backend starts the
                   job's tallyd (the CI check)
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn


def digits(seed):
    """(x_train, y_train, x_test, y_test) as tensors, the same on every
    rank: a seeded split of sklearn's digits, standardised on the train
    part."""
    from sklearn.datasets import load_digits

    d = load_digits()
    order = np.random.RandomState(seed).permutation(len(d.target))
    x, y = d.data[order].astype(np.float32), d.target[order]
    cut = int(0.7 * len(y))
    mean, std = x[:cut].mean(0), x[:cut].std(0) + 1e-3
    x = (x - mean) / std
    t = torch.from_numpy
    return t(x[:cut]), t(y[:cut]), t(x[cut:]), t(y[cut:])


def mlp(width, seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, width), nn.ReLU(),
                         nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, 10))


def uncompressed(ddp):
    import tally.torch

    ddp.register_comm_hook(tally.torch.HookState(),
                           tally.torch.allreduce_hook)
    return None


def narrow(compression):
    """The DDP hook with the gradients in 16- or 8-bit lanes, sign_ef or
    block_topk (per tensor, docs/compression.md sections 2 to 4)."""
    def setup(ddp):
        import tally.torch

        ddp.register_comm_hook(
            tally.torch.HookState(compression=compression),
            tally.torch.allreduce_hook)
        return None
    return setup


class _ResetResiduals:
    """sign without error feedback: the residuals zeroed after every
    step (tally_ef_reset_all), so each round sends the sign of the bare
    gradient: the study's "extreme compression" without its repair"""

    def __init__(self, state):
        self.state = state

    def step(self):
        self.state.client.ef_reset_all()


def sign_no_ef(ddp):
    import tally.torch

    state = tally.torch.HookState(compression="sign_ef")
    ddp.register_comm_hook(state, tally.torch.allreduce_hook)
    return _ResetResiduals(state)


def local_sgd(period):
    def setup(ddp):
        import tally.torch

        return tally.torch.LocalSGD(ddp, period=period)
    return setup


# method name -> setup(ddp): returns an object whose step() runs after
# each optimizer step, or None
METHODS = {
    "none": uncompressed,
    "int16": narrow("int16"),
    "int8": narrow("int8"),
    # 1-bit signs, majority vote, error feedback in libtally (section 3)
    "sign_ef": narrow("sign_ef"),
    # the top 10 % of each bucket's blocks, error feedback in libtally
    # (section 4)
    "block_topk10_ef": narrow("block_topk10_ef"),
    "block_topk1_ef": narrow("block_topk1_ef"),
    "local_sgd_h4": local_sgd(4),
    "local_sgd_h8": local_sgd(8),
    "local_sgd_h16": local_sgd(16),
    # the extremes: where convergence degrades (docs/compression.md,
    # section 10)
    "sign_no_ef": sign_no_ef,
    "local_sgd_h32": local_sgd(32),
}


def accuracy(model, x, y):
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def train(a, method):
    rank, world = dist.get_rank(), dist.get_world_size()
    xtr, ytr, xte, yte = digits(a.seed)
    mine = torch.arange(rank, len(ytr), world)
    xtr, ytr = xtr[mine], ytr[mine]
    model = mlp(a.width, a.seed)
    ddp = nn.parallel.DistributedDataParallel(model)
    stepper = METHODS[method](ddp)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=0.9)
    g = torch.Generator().manual_seed(a.seed * 1000 + rank)
    steps_per_epoch = len(ytr) // a.batch
    out = {"rank": rank, "method": method, "epochs": [],
           "grad_bytes": sum(p.numel() * 4 for p in model.parameters()),
           "steps": 0, "losses": []}
    dist.barrier()
    t0 = time.perf_counter()
    for epoch in range(a.epochs):
        perm = torch.randperm(len(ytr), generator=g)
        total = 0.0
        for s in range(steps_per_epoch):
            idx = perm[s * a.batch:(s + 1) * a.batch]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(ddp(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            if stepper is not None:
                stepper.step()
            total += float(loss)
            out["losses"].append(float(loss))
            out["steps"] += 1
            if a.max_steps and out["steps"] >= a.max_steps:
                break
        dist.barrier()
        out["epochs"].append({
            "epoch": epoch + 1, "loss": total / max(1, s + 1),
            "accuracy": accuracy(model, xte, yte) if rank == 0 else None,
            "elapsed_s": time.perf_counter() - t0})
        if a.max_steps and out["steps"] >= a.max_steps:
            break
    # local SGD: the model is the average; end with one if steps were
    # taken since the last
    if getattr(stepper, "steps", 0) and \
            stepper.steps % stepper.period != 0:
        stepper.average()
    out["final_accuracy"] = accuracy(model, xte, yte)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    out["checksum"] = float(flat.double().sum())
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--method", required=True,
                    help="a method, several separated by commas (run one "
                    "after the other, a JSON line each), or all")
    ap.add_argument("--backend", choices=["gloo", "tally"],
                    default="gloo")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--max-steps", type=int, default=0,
                    help="stop after this many steps (0: no limit)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    methods = list(METHODS) if a.method == "all" else a.method.split(",")
    for m in methods:
        if m not in METHODS:
            ap.error("unknown method %s (known: %s)"
                     % (m, ", ".join(METHODS)))
    if a.backend == "tally":
        import tally.torch  # noqa: F401  registers the backend
        dist.init_process_group("tally")
    else:
        dist.init_process_group("gloo", init_method="env://")
    for m in methods:
        print(json.dumps(train(a, m)), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
