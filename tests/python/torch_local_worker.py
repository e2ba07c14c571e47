# SPDX-License-Identifier: BSD-3-Clause
"""Worker of test_torch_local.py, run by torchrun on one host: every case
runs on every rank and prints `CASE <name> OK` or `CASE <name> FAIL
<why>`; the test reads rank 0's and rank 1's lines."""
import sys
import traceback

import torch
import torch.distributed as dist

import tally
import tally.torch

CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def ints(shape, rank, dtype, salt=0):
    """Small integers: exact in every dtype, and in their sums."""
    n = int(torch.tensor(shape).prod())
    i = torch.arange(n, dtype=torch.int64)
    return ((i * 31 + rank * 7 + salt) % 23 - 11).reshape(shape).to(dtype)


@case
def allreduce_sweep():
    r, n = dist.get_rank(), dist.get_world_size()
    for dtype in (torch.float32, torch.float16, torch.bfloat16,
                  torch.int32, torch.float64, torch.int64):
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MAX,
                   dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT):
            if op == dist.ReduceOp.AVG and not dtype.is_floating_point:
                continue
            for size in (1, 5, 4097, (3, 1000), 70001):
                shape = size if isinstance(size, tuple) else (size,)
                t = ints(shape, r, dtype)
                rows = torch.stack([ints(shape, k, torch.float64)
                                    for k in range(n)])
                want = {dist.ReduceOp.SUM: rows.sum(0),
                        dist.ReduceOp.AVG: rows.sum(0) / n,
                        dist.ReduceOp.MAX: rows.max(0).values,
                        dist.ReduceOp.MIN: rows.min(0).values,
                        dist.ReduceOp.PRODUCT: rows.prod(0)}[op]
                work = dist.all_reduce(t, op=op, async_op=True)
                work.wait()
                assert torch.equal(t.double(), want.to(dtype).double()), \
                    "%s %s %s" % (dtype, op, shape)


@case
def inplace_in_tally_memory():
    """A tensor in tally memory is reduced where it is (no staging)."""
    pg = dist.distributed_c10d._get_default_group()
    client = tally.torch.current().client
    buf = client.alloc(4096)
    t = buf.torch(torch.float32, count=1000)
    t.copy_(ints((1000,), dist.get_rank(), torch.float32))
    free_before = sum(len(v) for v in pg._pool._free.values())
    ptr = t.data_ptr()
    dist.all_reduce(t)
    want = sum(ints((1000,), k, torch.float64)
               for k in range(dist.get_world_size()))
    assert torch.equal(t.double(), want)
    assert t.data_ptr() == ptr
    assert sum(len(v) for v in pg._pool._free.values()) == free_before, \
        "a staging buffer was used"


@case
def broadcast_and_gathers():
    r, n = dist.get_rank(), dist.get_world_size()
    for dtype in (torch.float32, torch.float64, torch.uint8, torch.int64,
                  torch.bfloat16):
        t = ints((37,), r, dtype, salt=3)
        dist.broadcast(t, src=1)
        assert torch.equal(t, ints((37,), 1, dtype, salt=3)), dtype
        outs = [torch.empty(3, dtype=dtype) for _ in range(n)]
        dist.all_gather(outs, ints((3,), r, dtype))
        for k in range(n):
            assert torch.equal(outs[k], ints((3,), k, dtype)), dtype
    # a float that integer-sum paths would damage: exact bits travel
    x = torch.tensor([0.1, -3e-38, float("inf"), 1 / 3], dtype=torch.float32)
    y = x.clone() if r == 0 else torch.zeros(4)
    dist.broadcast(y, src=0)
    assert torch.equal(y, x)
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": r, "s": "x" * (r + 1)})
    assert objs == [{"rank": k, "s": "x" * (k + 1)} for k in range(n)]
    lst = [r, "from %d" % r]
    dist.broadcast_object_list(lst, src=1)
    assert lst == [1, "from 1"]
    out = torch.empty(2 * n, dtype=torch.int32)
    dist.all_gather_into_tensor(out, torch.tensor([r, 10 * r],
                                                  dtype=torch.int32))
    assert out.tolist() == sum(([k, 10 * k] for k in range(n)), [])
    g = [torch.empty(2) for _ in range(n)] if r == 0 else None
    dist.gather(torch.tensor([float(r), 1.0]), g, dst=0)
    if r == 0:
        assert [x.tolist() for x in g] == [[float(k), 1.0]
                                           for k in range(n)]
    s = torch.empty(3)
    dist.scatter(s, [torch.full((3,), float(k)) for k in range(n)]
                 if r == 1 else None, src=1)
    assert s.tolist() == [float(r)] * 3
    o = torch.empty(2)
    dist.reduce_scatter(o, [torch.full((2,), float(r + k))
                            for k in range(n)])
    assert o.tolist() == [float(sum(k + r for k in range(n)))] * 2
    t = torch.tensor([float(r)])
    dist.reduce(t, dst=0)
    if r == 0:
        assert t.item() == sum(range(n))
    dist.barrier()


@case
def refused_calls_say_why():
    for call in (lambda: dist.send(torch.zeros(1), 1 - dist.get_rank()),
                 lambda: dist.all_to_all_single(torch.zeros(2),
                                                torch.zeros(2))):
        try:
            call()
        except RuntimeError as e:
            assert "tally" in str(e), str(e)
        else:
            raise AssertionError("not refused")


@case
def ddp_hook_trains_in_step():
    """DDP over the tally backend (its constructor used to hang) with the
    hook: parameters equal on both ranks after training, and equal to
    DDP's own averaging computed here by hand from both ranks' data."""
    r, n = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(),
                                torch.nn.Linear(32, 4))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(),
                              torch.nn.Linear(32, 4))
    ref.load_state_dict(model.state_dict())
    ddp = torch.nn.parallel.DistributedDataParallel(model,
                                                    bucket_cap_mb=0.001)
    state = tally.torch.HookState()
    ddp.register_comm_hook(state, tally.torch.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(5):
        xs = [torch.randn(4, 8, generator=torch.Generator().manual_seed(
            100 * step + k)) for k in range(n)]
        opt.zero_grad()
        ddp(xs[r]).pow(2).mean().backward()
        opt.step()
        ropt.zero_grad()
        sum(ref(x).pow(2).mean() for x in xs).div(n).backward()
        ropt.step()
    assert state.step == 5 and state.copies >= 5, (state.step, state.copies)
    mine = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    every = [torch.empty_like(mine) for _ in range(n)]
    dist.all_gather(every, mine)
    assert all(torch.equal(every[0], x) for x in every)
    want = torch.cat([p.detach().reshape(-1) for p in ref.parameters()])
    assert torch.allclose(mine, want, rtol=1e-4, atol=1e-5), \
        (mine - want).abs().max()


@case
def shared_gradients_zero_copy():
    r, n = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 8)
    grads = tally.torch.SharedGradients(model, bucket_bytes=256)
    client = tally.torch.current().client
    for p in model.parameters():
        assert client.buffer_of(p.grad.data_ptr(),
                                p.grad.numel() * 4) is not None
    xs = [torch.randn(3, 16, generator=torch.Generator().manual_seed(k))
          for k in range(n)]
    grads.zero_grad()
    model(xs[r]).sum().backward()
    grads.synchronize()
    got = [p.grad.clone() for p in model.parameters()]
    want = []
    for p in model.parameters():
        p.grad = None
    ref = torch.nn.Linear(16, 8)
    ref.load_state_dict(model.state_dict())
    sum(ref(x).sum() for x in xs).div(n).backward()
    want = [p.grad for p in ref.parameters()]
    for g, w in zip(got, want):
        assert torch.allclose(g, w, rtol=1e-5, atol=1e-6)
    # set_to_none breaks the sharing: a clear error, not a wrong sum
    try:
        model(xs[r]).sum().backward()
        grads.synchronize()
    except tally.TallyError as e:
        assert "left tally memory" in str(e), str(e)
    else:
        raise AssertionError("gradients outside tally memory accepted")


def gathered(t):
    every = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(every, t)
    return every


@case
def local_sgd_averages_every_period():
    """LocalSGD: gradients averaged during warm-up (ranks stay equal),
    then local steps (ranks drift apart on their own data), and at the end
    of each period the parameters become the mean of the ranks'."""
    r, n = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model,
                                                    bucket_cap_mb=0.001)
    local = tally.torch.LocalSGD(ddp, period=3, warmup=1)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)

    def flat():
        return torch.cat([p.detach().reshape(-1)
                          for p in model.parameters()])
    averaged = []
    for step in range(1, 8):
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(
            1000 * r + step))
        opt.zero_grad()
        ddp(x).pow(2).mean().backward()
        opt.step()
        before = gathered(flat())
        did = local.step()
        every = gathered(flat())
        if step == 1:       # warm-up: averaged gradients, equal ranks
            assert not did and torch.equal(every[0], every[1])
        elif not did:       # local steps: the ranks' data differ
            assert not torch.equal(every[0], every[1]), step
        else:
            averaged.append(step)
            mean = sum(before) / n
            assert all(torch.equal(every[0], e) for e in every)
            assert torch.allclose(every[0], mean, rtol=1e-4, atol=1e-5), \
                (every[0] - mean).abs().max()
    assert averaged == [4, 7], averaged
    nparams = sum(p.numel() for p in model.parameters())
    assert local.rounds == 2 and local.bytes_averaged == 2 * nparams * 4
    try:
        tally.torch.LocalSGD(model, period=0)
    except ValueError as e:
        assert "period" in str(e), str(e)
    else:
        raise AssertionError("period 0 accepted")


@case
def failure_raises():
    """A failed collective raises in every rank (a C++ work made from a
    future would return as if it had succeeded).  Last: it breaks the
    ranks' agreement on sizes on purpose."""
    n = 4 if dist.get_rank() == 0 else 8
    t = torch.ones(n)
    try:
        dist.all_reduce(t)
    except tally.TallyError as e:
        assert e.name == "TALLY_EMISMATCH", str(e)
    else:
        raise AssertionError("a mismatched all_reduce succeeded")
    work = dist.all_reduce(torch.ones(n), async_op=True)
    try:
        work.wait()
    except tally.TallyError as e:
        assert e.name == "TALLY_EMISMATCH", str(e)
    else:
        raise AssertionError("a mismatched async all_reduce succeeded")
    assert not work.is_success()


def main():
    dist.init_process_group("tally")
    assert dist.get_backend() == "tally"
    only = sys.argv[1:]
    for fn in CASES:
        if only and fn.__name__ not in only:
            continue
        try:
            fn()
            print("CASE %s OK" % fn.__name__, flush=True)
        except Exception as e:      # noqa: BLE001
            print("CASE %s FAIL %s" % (fn.__name__, repr(e)), flush=True)
            traceback.print_exc()
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
