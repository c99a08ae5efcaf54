"""lina.context_parallel on the CPU: one sequence split across four
processes (torch.distributed with Gloo), each running its stretch with a
float64 recurrence written out below, equals the whole sequence run in one
process, for a gated delta rule, a DPLR rule with free a and b, and a
per-channel additive rule, with and without an initial state, K != V: the
outputs, the final state and (torch's autograd through the recurrence and
the exchange) every input's gradient. Then the fla-style API: contexts
from build_cp_context passed to lina's chunk functions (each rank's call
made by a float64 stand-in of ops._device_call) against the function on
the whole sequence, and each refusal of the builder and of the calls.

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

import lina  # noqa: E402
from lina import context_parallel, ops  # noqa: E402

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
        v.shape[0], v.shape[2], q.shape[-1], v.shape[-1],
        dtype=torch.float64)
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


# ---------------------------------------------------------------------------
# The fla-style API: build_cp_context and cp_context= on the chunk functions
# ---------------------------------------------------------------------------

EVEN_T = 32  # split evenly (fla's split) over the four ranks


def device_call(where, preset, *, q, k, v, options, schedule, g=None,
                beta=None, a=None, b=None, A_log=None, dt_bias=None,
                scale=None, initial_state=None, output_final_state=False,
                cu_seqlens=None, cu_seqlens_cpu=None, fill_A_log=False):
    """ops._device_call's stand-in (no GPU here): the float64 recurrence of
    the preset the function chose, so that what is checked is the context
    and the function's path to it."""
    if A_log is not None or dt_bias is not None or fill_A_log or \
            options.get("gate") or options.get("qk_l2norm") or \
            options.get("beta", "given") != "given":
        raise AssertionError(f"{where}: the stand-in has no {options}")
    if cu_seqlens is not None:
        # One sequence, this rank's: the context's cu_seqlens, not the
        # caller's.
        if q.shape[0] != 1 or cu_seqlens.tolist() != [0, q.shape[1]] or \
                cu_seqlens_cpu.tolist() != [0, q.shape[1]]:
            raise AssertionError(f"{where}: cu_seqlens {cu_seqlens} for "
                                 f"{q.shape[1]} tokens")
    form, d = {"gdn": ("delta", lambda: g.exp()[..., None].expand(
                   q.shape).contiguous()),
               "kda": ("delta", lambda: g.exp()),
               "gla": ("additive", lambda: g.exp()),
               "rwkv7": ("dplr", lambda: g.exp())}[preset]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    x = dict(q=q * scale, k=k, d=d(), a=a, b=b, beta=beta)
    o, ht = recurrence(form, x, v, initial_state)
    return o, (ht if output_final_state else None)


def api_inputs(name, batch, length, seed):
    """(the function, its tensors by fla's names) of a call."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa
    unit = lambda: torch.nn.functional.normalize(  # noqa: E731
        r(batch, length, HV, K), dim=-1)
    logd = lambda *s: -torch.rand(*s, generator=g,  # noqa: E731
                                  dtype=torch.float64)
    x = dict(q=r(batch, length, HV, K), k=unit(), v=r(batch, length, HV, V))
    if name == "chunk_gated_delta_rule":
        x.update(g=logd(batch, length, HV),
                 beta=torch.sigmoid(r(batch, length, HV)))
    elif name == "chunk_kda":
        x.update(g=logd(batch, length, HV, K),
                 beta=torch.sigmoid(r(batch, length, HV)))
    elif name == "chunk_gla":
        x.update(g=logd(batch, length, HV, K))
    else:  # chunk_dplr_delta_rule: b apart from a, as in inputs()
        x.update(a=unit(), b=-0.5 * unit(), gk=logd(batch, length, HV, K))
    return getattr(lina, name), x, r(batch, HV, K, V)


# (function, built from, with an initial state, differentiated)
SCENARIOS = {
    "gdn even": ("chunk_gated_delta_rule", "cu_seqlens", True, False),
    "kda even": ("chunk_kda", "cu_seqlens", False, False),
    "gla bounds": ("chunk_gla", "bounds", True, False),
    "dplr bounds": ("chunk_dplr_delta_rule", "bounds", False, False),
    "gdn bounds grad": ("chunk_gated_delta_rule", "bounds", True, True),
    "dplr even grad": ("chunk_dplr_delta_rule", "cu_seqlens", True, True),
}


def scenario_shape(built_from):
    """(batch, length, cuts): packed [1, 32] split evenly, or [2, 31] cut
    at CUTS."""
    if built_from == "cu_seqlens":
        step = EVEN_T // (len(CUTS) - 1)
        return 1, EVEN_T, list(range(0, EVEN_T + 1, step))
    return B, T, CUTS


def scenario_loss(o, ht, batch, length, t0, t1, last):
    W, U = (torch.randn(batch, length, HV, V, dtype=torch.float64,
                        generator=torch.Generator().manual_seed(5)),
            torch.randn(batch, HV, K, V, dtype=torch.float64,
                        generator=torch.Generator().manual_seed(6)))
    loss = (o * W[:, t0:t1]).sum()
    return loss + (ht * U).sum() if last else loss


def run_scenario(rank, world, name):
    fn_name, built_from, with_h0, grad = SCENARIOS[name]
    batch, length, cuts = scenario_shape(built_from)
    fn, x, h0 = api_inputs(fn_name, batch, length, seed=len(name))
    t0, t1 = cuts[rank], cuts[rank + 1]
    if built_from == "cu_seqlens":
        cu = torch.tensor([0, length])
        ctx = context_parallel.build_cp_context(cu, None)
        extra = dict(cu_seqlens=cu)  # the sequence's: the context's replace it
    else:
        ctx = context_parallel.build_cp_context(bounds=(t0, t1))
        extra = {}
    mine = {n: t[:, t0:t1].clone().requires_grad_(grad) for n, t in x.items()}
    h0 = h0.clone().requires_grad_(grad and rank == 0)
    o, ht = fn(**mine, initial_state=h0 if with_h0 else None,
               output_final_state=True, cp_context=ctx, **extra)
    out = {"o": o.detach(), "ht": ht.detach(), "start": ctx.start,
           "end": ctx.end}
    _, no_state = fn(**{n: t.detach() for n, t in mine.items()},
                     cp_context=ctx, **extra)
    out["no final state"] = no_state
    if grad:
        scenario_loss(o, ht, batch, length, t0, t1,
                      rank == world - 1).backward()
        out["grads"] = {n: t.grad for n, t in dict(mine, h0=h0).items()
                        if t.grad is not None}
    return out


def refusal(call):
    """(the exception's type name, its message) of ``call``, or None."""
    try:
        call()
    except Exception as e:  # noqa: BLE001 (the test compares them)
        return type(e).__name__, str(e)
    return None


def refusals(rank, world):
    build = context_parallel.build_cp_context
    cu = lambda *v: torch.tensor(v)  # noqa: E731
    out = {
        "group not a group": refusal(lambda: build(cu(0, 32), "world")),
        "zigzag": refusal(lambda: build(cu(0, 32), None, layout="zigzag")),
        "unknown layout": refusal(lambda: build(cu(0, 32), None,
                                                layout="striped")),
        "packed sequences": refusal(lambda: build(cu(0, 10, 32), None)),
        "too few tokens": refusal(lambda: build(cu(0, 3), None)),
        "uneven": refusal(lambda: build(cu(0, 30), None)),
        "neither": refusal(lambda: build()),
        "both": refusal(lambda: build(cu(0, 32), bounds=(0, 8))),
        "cu_seqlens of floats": refusal(lambda: build(torch.zeros(2))),
        # Collectives: every rank calls, and every rank raises.
        "empty stretch": refusal(lambda: build(
            bounds=[(0, 5), (5, 5), (5, 9), (9, 12)][rank])),
        "gap": refusal(lambda: build(
            bounds=[(0, 5), (6, 7), (7, 9), (9, 12)][rank])),
        "not a pair": refusal(lambda: build(
            bounds=(0, 5) if rank == 0 else (5.0, 9) if rank == 1 else
            [(9, 10), (10, 12)][rank - 2])),
    }
    # new_group is collective too: ranks 2 and 3 get a placeholder.
    pair = dist.new_group([0, 1])
    out["not in the group"] = refusal(lambda: build(cu(0, 32), pair))
    fn, x, _ = api_inputs("chunk_gla", 1, 8, seed=3)
    ctx = build(cu(0, 32), None)
    out["fla's context"] = refusal(lambda: fn(**x, cp_context=object()))
    out["tokens"] = refusal(lambda: fn(**{n: t[:, :7] for n, t in x.items()},
                                       cp_context=ctx))
    bounded = build(bounds=(CUTS[rank], CUTS[rank + 1]))
    _, x, _ = api_inputs("chunk_gla", 1, CUTS[rank + 1] - CUTS[rank], 4)
    out["cu_seqlens with bounds"] = refusal(lambda: fn(
        **x, cp_context=bounded, cu_seqlens=torch.tensor([0, x["v"].shape[1]])))
    return out


def api_main(rank, world, port, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        with unittest.mock.patch.object(ops, "_device_call", device_call):
            out = {name: run_scenario(rank, world, name)
                   for name in SCENARIOS}
            out["refusals"] = refusals(rank, world)
        results[rank] = out
    finally:
        dist.destroy_process_group()


@unittest.skipUnless(torch is not None, "needs torch (CPU is enough)")
class FlaStyleTest(unittest.TestCase):
    """build_cp_context and the chunk functions' cp_context=, each rank's
    call made by ops._device_call's float64 stand-in, against the same
    function called on the whole sequence in one process."""

    @classmethod
    def setUpClass(cls):
        world = len(CUTS) - 1
        with mp.Manager() as manager:
            results = manager.dict()
            mp.spawn(api_main, args=(world, free_port(), results),
                     nprocs=world, join=True)
            cls.parts = [dict(results[r]) for r in range(world)]

    def close(self, got, want):
        self.assertEqual(got.shape, want.shape)
        self.assertLess(((got - want).norm() / want.norm()).item(), 1e-12)

    def test_every_rank_matches_the_whole_run(self):
        for name, (fn_name, built_from, with_h0, grad) in SCENARIOS.items():
            with self.subTest(name), unittest.mock.patch.object(
                    ops, "_device_call", device_call):
                batch, length, cuts = scenario_shape(built_from)
                fn, x, h0 = api_inputs(fn_name, batch, length,
                                       seed=len(name))
                for t in list(x.values()) + [h0]:
                    t.requires_grad_(grad)
                o, ht = fn(**x, initial_state=h0 if with_h0 else None,
                           output_final_state=True)
                parts = [p[name] for p in self.parts]
                self.assertEqual([(p["start"], p["end"]) for p in parts],
                                 list(zip(cuts, cuts[1:])))
                self.close(torch.cat([p["o"] for p in parts], 1), o.detach())
                # The last rank's final state is the sequence's.
                self.close(parts[-1]["ht"], ht.detach())
                # fla's default: no final state.
                self.assertTrue(all(p["no final state"] is None
                                    for p in parts))
                if not grad:
                    continue
                scenario_loss(o, ht, batch, length, 0, length,
                              True).backward()
                for n, t in x.items():
                    self.close(torch.cat([p["grads"][n] for p in parts], 1),
                               t.grad)
                self.close(parts[0]["grads"]["h0"], h0.grad)

    def test_refusals(self):
        want = {
            "group not a group": ("TypeError", "group must be a "
                                  "torch.distributed ProcessGroup"),
            "zigzag": ("ValueError", "layout='zigzag' is not supported"),
            "unknown layout": ("ValueError",
                               "layout must be 'contiguous', got 'striped'"),
            "packed sequences": ("ValueError", "cu_seqlens holds 2 "
                                 "sequences, but lina's context parallelism "
                                 "splits one sequence"),
            "too few tokens": ("ValueError", "the sequence's 3 tokens leave "
                               "a rank of the 4 without any"),
            "uneven": ("ValueError", "30 tokens do not split evenly over 4 "
                       "ranks; pad it to a multiple of 4, or give each rank "
                       "its bounds=(start, end)"),
            "neither": ("ValueError", "or this rank's bounds=(start, end), "
                        "got neither"),
            "both": ("ValueError", "bounds=(start, end), not both"),
            "cu_seqlens of floats": ("TypeError", "cu_seqlens must be a 1-D "
                                     "int64 or int32 tensor"),
            "empty stretch": ("ValueError", "rank 1's bounds [5, 5) hold no "
                              "tokens"),
            "gap": ("ValueError", "must tile the sequence in rank order from "
                    "0, but rank 1 starts at 6, not 5"),
            "fla's context": ("TypeError", "cp_context must be a "
                              "lina.context_parallel.CPContext, built by "
                              "lina.context_parallel.build_cp_context, got "
                              "object"),
            "tokens": ("ValueError", "this rank's inputs hold 7 tokens (v's "
                       "dimension 1), but its cp_context gives it"),
            "cu_seqlens with bounds": ("ValueError", "cu_seqlens with a "
                                       "cp_context built from bounds"),
        }
        for rank, part in enumerate(self.parts):
            got = part["refusals"]
            for case, (kind, message) in want.items():
                with self.subTest(case, rank=rank):
                    self.assertIsNotNone(got[case])
                    self.assertEqual(got[case][0], kind)
                    self.assertIn(message, got[case][1])
            with self.subTest("not a pair", rank=rank):
                kind, message = got["not a pair"]
                self.assertEqual(kind, "TypeError")
                self.assertIn("bounds must be a pair of ints (start, end), "
                              "got " + ("(5.0, 9)" if rank == 1 else
                                        "something else on rank 1"), message)
            with self.subTest("not in the group", rank=rank):
                if rank < 2:
                    self.assertIsNone(got["not in the group"])
                else:
                    self.assertEqual(got["not in the group"][0], "ValueError")
                    self.assertIn("this process is not in the group",
                                  got["not in the group"][1])

    def test_without_torch_distributed_initialized(self):
        with self.assertRaisesRegex(RuntimeError, "torch.distributed is not "
                                    "initialized; call torch.distributed."
                                    "init_process_group first"):
            context_parallel.build_cp_context(torch.tensor([0, 8]))


@unittest.skipUnless(torch is not None, "needs torch (CPU is enough)")
class CombineTest(unittest.TestCase):
    def test_a_run_without_final_state_is_refused(self):
        with self.assertRaisesRegex(ValueError, "output_final_state=True"), \
                unittest.mock.patch.object(dist, "get_rank", lambda g: 0), \
                unittest.mock.patch.object(dist, "get_world_size",
                                           lambda g: 1):
            context_parallel.forward(lambda v, s: (v, None),
                                     torch.zeros(1, 2, 1, 3))


class ReachTest(unittest.TestCase):
    """`import lina` alone gives lina.context_parallel, as the docs use it
    (and the GPU test's rank processes, which import nothing else): checked
    in a fresh interpreter, where no earlier import of the submodule can
    hide its absence."""

    def test_import_lina_reaches_the_submodule(self):
        import subprocess
        code = ("import lina; "
                "print(lina.context_parallel.build_cp_context.__name__)")
        env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
        run = subprocess.run([sys.executable, "-c", code], env=env,
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.strip(), "build_cp_context")


if __name__ == "__main__":
    unittest.main()
