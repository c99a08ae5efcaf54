"""lina.context_parallel on the CPU: one sequence split across four
processes (torch.distributed with Gloo), each running its stretch with a
float64 recurrence written out below, equals the whole sequence run in one
process, for a gated delta rule, a DPLR rule with free a and b, and a
per-channel additive rule, with and without an initial state, K != V: the
outputs, the final state and (torch's autograd through the recurrence and
the exchange) every input's gradient.

    python3 -m unittest discover -s test/python -p test_context_parallel.py

Needs torch (CPU); skipped without it.
"""
from __future__ import annotations

import os
import socket
import sys
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

from lina import context_parallel  # noqa: E402

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:
    torch = None

B, T, HV, K, V = 2, 31, 3, 5, 4
CUTS = [0, 11, 12, 20, 31]  # four ranks, one of a single token


def recurrence(form, x, v, h0):
    """S_t = (D_t + b_t a_t^T) S_{t-1} + k_t v_t^T (delta: b = -beta k,
    a = k, write beta k v^T), o_t = S_t^T q_t; float64, token by token."""
    q, k, d, a, b, beta = (x[n] for n in ("q", "k", "d", "a", "b", "beta"))
    S = h0.clone() if h0 is not None else torch.zeros(
        B, HV, K, v.shape[-1], dtype=torch.float64)
    S = S.double()
    out = []
    for t in range(q.shape[1]):
        D = torch.diag_embed(d[:, t])                      # [B, HV, K, K]
        if form == "delta":
            kt = k[:, t]
            A = D - beta[:, t, :, None, None] * kt[..., :, None] * kt[..., None, :] @ D
            W = beta[:, t, :, None, None] * kt[..., :, None]
        elif form == "dplr":
            A = D + b[:, t][..., :, None] * a[:, t][..., None, :]
            W = k[:, t][..., :, None]
        else:
            A, W = D, k[:, t][..., :, None]
        S = A @ S + W * v[:, t][..., None, :].double()
        out.append(torch.einsum("bhkv,bhk->bhv", S, q[:, t]))
    return torch.stack(out, 1), S


def inputs(form, seed):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa
    unit = lambda: torch.nn.functional.normalize(r(B, T, HV, K), dim=-1)  # noqa
    # b apart from a: a transition that is not symmetric, so a transposed
    # T cannot pass.
    x = {"q": r(B, T, HV, K), "k": unit(),
         "d": torch.exp(-torch.rand(B, T, HV, K, generator=g,
                                    dtype=torch.float64)),
         "a": unit(), "b": -0.5 * unit(),
         "beta": torch.sigmoid(r(B, T, HV))}
    if form != "additive":
        x["d"] = x["d"][..., :1].expand(B, T, HV, K).contiguous()
    return x, r(B, T, HV, V), r(B, HV, K, V)


def rank_main(rank, world, port, form, with_h0, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        x, v, h0 = inputs(form, seed=11)
        t0, t1 = CUTS[rank], CUTS[rank + 1]
        mine = {n: t[:, t0:t1] for n, t in x.items()}
        run = lambda vv, s: recurrence(form, mine, vv, s)  # noqa: E731
        o, ht = context_parallel.forward(run, v[:, t0:t1],
                                         initial_state=h0 if with_h0 else None)
        results[rank] = (o, ht)
    finally:
        dist.destroy_process_group()


# (form, the inputs that need a gradient): every input of each form, then
# only the initial state (only rank 0's (T, C) carry gradients; the others'
# outputs still depend on h0, through what they gather), then only q (no
# rank's (T, C) carry any: no exchange in the backward).
GRAD_CASES = {
    "gated delta rule": ("delta", ("q", "k", "d", "beta", "v", "h0")),
    "dplr with free a and b": ("dplr", ("q", "k", "d", "a", "b", "v", "h0")),
    "per-channel additive": ("additive", ("q", "k", "d", "v", "h0")),
    "only the initial state": ("delta", ("h0",)),
    "only q": ("dplr", ("q",)),
}


def rank_gradients(rank, world, form, wants):
    """One rank's gradients of sum(o * W) on every rank plus sum(ht * U) on
    the last, for the inputs named in ``wants`` (its slices, and h0 on rank
    0)."""
    x, v, h0 = inputs(form, seed=12)
    W, U = weights(seed=13)
    t0, t1 = CUTS[rank], CUTS[rank + 1]
    mine = {n: t[:, t0:t1].clone().requires_grad_(n in wants)
            for n, t in x.items()}
    v = v[:, t0:t1].clone().requires_grad_("v" in wants)
    h0 = h0.clone().requires_grad_("h0" in wants and rank == 0)
    run = lambda vv, s: recurrence(form, mine, vv, s)  # noqa: E731
    o, ht = context_parallel.forward(run, v, initial_state=h0)
    loss = (o * W[:, t0:t1]).sum()
    if rank == world - 1:
        loss = loss + (ht * U).sum()
    leaves = dict(mine, v=v, h0=h0)
    if loss.requires_grad:
        loss.backward()
    return {n: leaves[n].grad for n in wants if leaves[n].grad is not None}


def grad_main(rank, world, port, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        results[rank] = {case: rank_gradients(rank, world, form, wants)
                         for case, (form, wants) in GRAD_CASES.items()}
    finally:
        dist.destroy_process_group()


def weights(seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, T, HV, V, generator=g, dtype=torch.float64),
            torch.randn(B, HV, K, V, generator=g, dtype=torch.float64))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipUnless(torch is not None, "needs torch (CPU is enough)")
class ContextParallelTest(unittest.TestCase):
    def check(self, form, with_h0):
        world = len(CUTS) - 1
        with mp.Manager() as manager:
            results = manager.dict()
            mp.spawn(rank_main, args=(world, free_port(), form, with_h0,
                                      results), nprocs=world, join=True)
            parts = [results[r] for r in range(world)]
        x, v, h0 = inputs(form, seed=11)
        o, ht = recurrence(form, x, v, h0 if with_h0 else None)
        got = torch.cat([p[0] for p in parts], 1)
        self.assertEqual(got.shape, o.shape)
        self.assertLess(((got - o).norm() / o.norm()).item(), 1e-12)
        last = parts[-1][1]
        self.assertLess(((last - ht).norm() / ht.norm()).item(), 1e-12)

    def test_gated_delta_rule(self):
        self.check("delta", with_h0=True)

    def test_dplr_with_free_a_and_b(self):
        self.check("dplr", with_h0=False)

    def test_per_channel_additive(self):
        self.check("additive", with_h0=True)


@unittest.skipUnless(torch is not None, "needs torch (CPU is enough)")
class BackwardTest(unittest.TestCase):
    """Every rank's gradients, put together, are the whole run's."""

    def test_gradients(self):
        world = len(CUTS) - 1
        with mp.Manager() as manager:
            results = manager.dict()
            mp.spawn(grad_main, args=(world, free_port(), results),
                     nprocs=world, join=True)
            parts = [dict(results[r]) for r in range(world)]
        for case, (form, wants) in GRAD_CASES.items():
            x, v, h0 = inputs(form, seed=12)
            W, U = weights(seed=13)
            leaves = dict(x, v=v, h0=h0)
            for n in wants:
                leaves[n].requires_grad_()
            o, ht = recurrence(form, x, v, h0)
            ((o * W).sum() + (ht * U).sum()).backward()
            for n in wants:
                with self.subTest(case, input=n):
                    want = leaves[n].grad
                    if n == "h0":
                        got = parts[0][case][n]
                        self.assertTrue(all(n not in p[case]
                                            for p in parts[1:]))
                    else:
                        got = torch.cat([p[case][n] for p in parts], 1)
                    self.assertEqual(got.shape, want.shape)
                    self.assertLess(
                        ((got - want).norm() / want.norm()).item(), 1e-12)


@unittest.skipUnless(torch is not None, "needs torch (CPU is enough)")
class CombineTest(unittest.TestCase):
    def test_a_run_without_final_state_is_refused(self):
        with self.assertRaisesRegex(ValueError, "output_final_state=True"), \
                unittest.mock.patch.object(dist, "get_rank", lambda g: 0), \
                unittest.mock.patch.object(dist, "get_world_size",
                                           lambda g: 1):
            context_parallel.forward(lambda v, s: (v, None),
                                     torch.zeros(1, 2, 1, 3))


if __name__ == "__main__":
    unittest.main()
