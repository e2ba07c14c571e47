#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Train a small CNN on synthetic data with DistributedDataParallel
through tally, printing the loss of every step.

    torchrun --nnodes 2 --nproc_per_node 2 --node_rank 0 \\
        --master_addr HOST0 --master_port 29500 examples/train_ddp.py
    python3 examples/train_ddp.py --reference --csv ref.csv   # 1 process

Data: every step draws a global batch from a generator seeded with
(seed, step); rank r trains on its slice, so N ranks together see
exactly what the single-process reference (--reference) sees, and the
loss curves must agree.  The global loss printed is the mean of the
ranks' losses (equal slices), all-reduced in float64.

--backend tally|gloo      the default process group (default tally)
--hook tally|none         DDP communication hook (default tally)
--mode ddp|shared         shared: tally.torch.SharedGradients (gradients in
                          tally memory, zero copy) instead of DDP
--plot FILE               rank 0 draws loss against step (PNG), with the
                          curve of --compare CSV when given
--nonfinite STEP:RANK     that rank's gradients get an inf at that step;
                          every rank must see it and skip the step, as
                          GradScaler does with NCCL
--die-at STEP:RANK        that rank kills itself (SIGKILL) at that step
See docs/pytorch.md.
"""
import argparse
import csv
import os
import signal
import sys
import time

import torch
import torch.nn as nn

IMAGE = 16
CLASSES = 10


def make_model(width):
    return nn.Sequential(
        nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(4), nn.Flatten(),
        nn.Linear(2 * width * 16, CLASSES))


def batch(seed, step, size):
    """The global batch of @step: noisy copies of one of CLASSES fixed
    random templates; the label says which (something to learn)."""
    g = torch.Generator().manual_seed(seed * 100003 + step)
    y = torch.randint(0, CLASSES, (size,), generator=g)
    noise = torch.randn(size, 1, IMAGE, IMAGE, generator=g)
    templates = torch.randn(CLASSES, 1, IMAGE, IMAGE,
                            generator=torch.Generator().manual_seed(seed))
    return templates[y] + noise, y


def parse_at(text):
    if not text:
        return None
    step, rank = text.split(":")
    return int(step), int(rank)


def args_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="tally", choices=["tally", "gloo"])
    p.add_argument("--hook", default="tally", choices=["tally", "none"])
    p.add_argument("--mode", default="ddp", choices=["ddp", "shared"])
    p.add_argument("--reference", action="store_true",
                   help="one process, the whole global batch, no dist")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=32, help="global batch")
    p.add_argument("--width", type=int, default=8)
    p.add_argument("--lr", type=float, default=0.3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--csv", help="write step,loss here (rank 0)")
    p.add_argument("--plot", help="write a PNG of loss against step")
    p.add_argument("--compare", help="reference CSV for --plot")
    p.add_argument("--params-out", help="rank 0 saves final parameters")
    p.add_argument("--nonfinite", help="STEP:RANK")
    p.add_argument("--die-at", help="STEP:RANK")
    return p


def flat_params(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def write_outputs(args, losses):
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["step", "loss"])
            for i, loss in enumerate(losses):
                w.writerow([i, repr(loss)])
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        label = "tally" if not args.reference else "single process"
        ax.plot(range(len(losses)), losses, label=label, marker="o",
                markersize=3)
        if args.compare:
            with open(args.compare) as f:
                ref = [float(r["loss"]) for r in csv.DictReader(f)]
            ax.plot(range(len(ref)), ref, label="single-process reference",
                    linestyle="--")
        ax.set_xlabel("step")
        ax.set_ylabel("training loss")
        ax.set_title("train_ddp.py: %d steps, global batch %d"
                     % (len(losses), args.batch))
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)


def reference(args):
    torch.manual_seed(args.seed)
    model = make_model(args.width)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    losses = []
    for step in range(args.steps):
        x, y = batch(args.seed, step, args.batch)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        print("step %d loss %.9g" % (step, loss.item()), flush=True)
    write_outputs(args, losses)
    if args.params_out:
        torch.save(flat_params(model), args.params_out)
    return 0


def grads_finite(model):
    return all(torch.isfinite(p.grad).all() for p in model.parameters()
               if p.grad is not None)


def train(args):
    import torch.distributed as dist
    import tally.torch
    from tally import TallyError

    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        sys.exit("--batch %d is not a multiple of %d ranks"
                 % (args.batch, world))
    per = args.batch // world
    torch.manual_seed(args.seed)
    model = make_model(args.width)
    nonfinite, die = parse_at(args.nonfinite), parse_at(args.die_at)

    if args.mode == "ddp":
        net = nn.parallel.DistributedDataParallel(model)
        if args.hook == "tally":
            net.register_comm_hook(tally.torch.HookState(),
                                   tally.torch.allreduce_hook)
        shared = None
    else:
        # SharedGradients does not broadcast: rank 0's start goes out
        for p in model.parameters():
            dist.broadcast(p.data, 0)
        net, shared = model, tally.torch.SharedGradients(model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    losses = []
    start = time.time()
    try:
        for step in range(args.steps):
            if die and die == (step, rank):
                print("rank %d dies at step %d t=%.3f"
                      % (rank, step, time.time()), flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            hooks = []
            if nonfinite and nonfinite == (step, rank):
                p0 = next(model.parameters())
                hooks.append(p0.register_hook(
                    lambda g: g.index_fill(0, torch.tensor([0]),
                                           float("inf"))))
            x, y = batch(args.seed, step, args.batch)
            x, y = x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1)
                                                         * per]
            if shared:
                shared.zero_grad()
            else:
                opt.zero_grad(set_to_none=False)
            loss = nn.functional.cross_entropy(net(x), y)
            loss.backward()
            if shared:
                shared.synchronize()
            for h in hooks:
                h.remove()
            # GradScaler's rule: skip the step when any gradient is
            # non-finite (all ranks see the same all-reduced gradients)
            if grads_finite(model):
                opt.step()
            else:
                print("rank %d step %d skipped: non-finite gradients"
                      % (rank, step), flush=True)
            mean = loss.detach().double().reshape(1)
            dist.all_reduce(mean)
            mean /= world
            losses.append(mean.item())
            if rank == 0:
                print("step %d loss %.9g" % (step, mean.item()), flush=True)
    except (TallyError, RuntimeError) as e:
        print("rank %d failed after %.3f s at t=%.3f: %s"
              % (rank, time.time() - start, time.time(), e), flush=True)
        return 1

    mine = flat_params(model)
    every = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    equal = all(torch.equal(every[0], p) for p in every)
    print("rank %d params equal on all ranks: %s" % (rank, equal),
          flush=True)
    if rank == 0:
        write_outputs(args, losses)
        if args.params_out:
            torch.save(mine, args.params_out)
    dist.destroy_process_group()
    return 0 if equal else 1


def main():
    args = args_parser().parse_args()
    return reference(args) if args.reference else train(args)


if __name__ == "__main__":
    sys.exit(main())
