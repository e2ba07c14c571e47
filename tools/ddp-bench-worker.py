#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""One process of tools/ddp-bench (started by it; not meant for hand use).

  shaped   one rank of the 4-host DDP job (env:// rendezvous: RANK,
           WORLD_SIZE, MASTER_ADDR, MASTER_PORT; TALLY_SOCKET names this
           host's tallyd): trains an MLP with no communication (local),
           then with DistributedDataParallel under gloo's all-reduce and
           with the tally hook (in --order), and prints one JSON line of
           per-step times.
  buckets  one of 4 clients of a local tallyd: times 1 KiB buckets through
           tally.torch.allreduce_hook (copy path) and through
           SharedGradients (zero copy), one bucket at a time, and prints
           one JSON line of microseconds per bucket.
"""
import argparse
import json
import sys
import time

import torch
import torch.nn as nn


def mlp(width, depth, seed):
    """depth Linear(width, width) layers and a 10-way head: 4 * width^2 *
    depth bytes of float32 gradients, plus biases."""
    torch.manual_seed(seed)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


def train_phase(mode, a, x, y):
    """warm-up plus timed steps of DDP; the list of timed step seconds"""
    import tally.torch

    model = mlp(a.width, a.depth, a.seed)
    # local: no communication at all, the compute floor of a step
    net = model if mode == "local" else \
        nn.parallel.DistributedDataParallel(model)
    if mode == "tally":
        net.register_comm_hook(tally.torch.HookState(),
                               tally.torch.allreduce_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    times = []
    for step in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    # every rank ends with the same parameters, or the run is wrong
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return times, float(flat.double().sum())


def shaped(a):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    g = torch.Generator().manual_seed(a.seed * 1000 + rank)
    x = torch.randn(a.batch, a.width, generator=g)
    y = torch.randint(0, 10, (a.batch,), generator=g)
    nbytes = sum(p.numel() * 4 for p in mlp(a.width, a.depth, 0)
                 .parameters())
    out = {"rank": rank, "grad_bytes": nbytes}
    for mode in a.order.split(","):
        dist.barrier()
        out[mode], out[mode + "_checksum"] = train_phase(mode, a, x, y)
    out.pop("local_checksum", None)     # local: each rank its own
    dist.barrier()
    print(json.dumps(out), flush=True)
    dist.destroy_process_group()


class Bucket:
    """What the hook reads of a torch.distributed.GradBucket."""

    def __init__(self, index, tensor, last):
        self._index, self._tensor, self._last = index, tensor, last

    def buffer(self):
        return self._tensor

    def index(self):
        return self._index

    def is_last(self):
        return self._last


def timed(run, n):
    """(wall, CPU of this process's threads) microseconds per bucket"""
    t0, c0 = time.perf_counter(), time.process_time()
    run(n)
    return ((time.perf_counter() - t0) * 1e6 / n,
            (time.process_time() - c0) * 1e6 / n)


def time_hook(client, a):
    """us per bucket: allreduce_hook, then wait its Future, one at a time"""
    import tally.torch

    state = tally.torch.HookState(client=client)
    count = a.bucket_bytes // 4
    buckets = [Bucket(i, torch.ones(count), i == a.nbuckets - 1)
               for i in range(a.nbuckets)]

    def run(n):
        for i in range(n):
            tally.torch.allreduce_hook(state, buckets[i % a.nbuckets]).wait()
    run(a.warmup)
    us, cpu = timed(run, a.iters)
    ok = all(torch.all(b.buffer() == 1.0) for b in buckets)
    return us, cpu, ok, state.copies


def time_shared(client, a):
    """us per bucket: SharedGradients' submission of one bucket on tally
    memory (what its AccumulateGrad hook does), then wait it"""
    import tally.torch

    count = a.bucket_bytes // 4

    class Params(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.ParameterList(
                [nn.Parameter(torch.ones(count)) for _ in range(a.nbuckets)])
    grads = tally.torch.SharedGradients(Params(), client=client,
                                        bucket_bytes=a.bucket_bytes)
    assert len(grads.buckets) == a.nbuckets
    for b in grads.buckets:
        b.flat.fill_(1.0)

    def run(n):
        for i in range(n):
            b = grads.buckets[i % a.nbuckets]
            grads._submit(b)
            b.req.wait()
            if b.index == a.nbuckets - 1:
                grads.synchronize()     # all done: resets, next step
    run(a.warmup)
    us, cpu = timed(run, a.iters)
    ok = all(torch.all(b.flat == 1.0) for b in grads.buckets)
    return us, cpu, ok


def buckets(a):
    import tally

    torch.set_num_threads(1)
    client = tally.Client(a.socket)
    out = {"rank": client.rank}
    for path in a.order.split(","):
        if path == "hook":
            out["hook_us"], out["hook_cpu_us"], out["hook_ok"], \
                out["copies"] = time_hook(client, a)
        else:
            out["shared_us"], out["shared_cpu_us"], out["shared_ok"] = \
                time_shared(client, a)
    print(json.dumps(out), flush=True)
    client.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["shaped", "buckets"])
    p.add_argument("--order", default="gloo,tally")
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--socket")
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--nbuckets", type=int, default=16)
    p.add_argument("--bucket-bytes", type=int, default=1024)
    a = p.parse_args()
    torch.set_num_threads(1)
    if a.what == "shaped":
        shaped(a)
    else:
        buckets(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
