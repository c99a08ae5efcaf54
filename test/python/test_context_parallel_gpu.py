"""lina.context_parallel on GPUs with lina's own kernels: one sequence split
across several processes, each calling a chunk function with a
``cp_context``, against the same function on the whole sequence in one
process.

    python3 -m unittest discover -s test/python -p test_context_parallel_gpu.py

Every chunk function that takes ``cp_context`` (simple GLA, retention, GLA,
delta rule, gated delta rule, KDA, DPLR), bf16, B = 1, T = 1024, H = 4,
K = V = 64, an initial state and the final state, split evenly from
``cu_seqlens``: each rank's outputs and the last rank's final state. Then the
gated delta rule's gradients (q, k, v, g, beta and the initial state) with
uneven ``bounds``, every rank calling backward.

Two ranks, and four where there are four GPUs. With a GPU a rank the ranks
talk over NCCL, rank r on cuda:r; with fewer GPUs than ranks (one H200) all
ranks share cuda:0 over Gloo, since NCCL refuses two ranks on one device
(Gloo's all_gather and all_reduce take CUDA tensors: it copies them through
pinned host memory).

Needs torch with CUDA and torch.distributed, and liblina.so; skipped,
saying why, without them. A run that has not finished after
$LINA_CP_GPU_TIMEOUT_S seconds (default 480) fails, its processes killed.
"""
from __future__ import annotations

import datetime
import os
import socket
import tempfile
import time
import unittest

from gpu_support import F, lina, needs_gpu, torch

if torch is not None:
    import torch.distributed as dist
    import torch.multiprocessing as mp
    HAVE_DIST = dist.is_available()
else:
    dist = mp = None
    HAVE_DIST = False

needs_dist = unittest.skipUnless(HAVE_DIST, "needs torch.distributed")

B, T, H, K, V = 1, 1024, 4, 64, 64
FUNCTIONS = ("chunk_simple_gla", "chunk_retention", "chunk_gla",
             "chunk_delta_rule", "chunk_gated_delta_rule", "chunk_kda",
             "chunk_dplr_delta_rule")
# The gradient case's stretches: uneven, and not on chunk boundaries.
GRAD_CUTS = {2: [0, 400, T], 4: [0, 200, 512, 700, T]}
TIMEOUT_S = float(os.environ.get("LINA_CP_GPU_TIMEOUT_S", "480"))

# NVLink multicast buys nothing for exchanges of a few hundred KB, and the
# shared GPU hosts keep it off; the ranks inherit these.
for _name, _value in (("NCCL_NVLS_ENABLE", "0"),
                      ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")):
    os.environ.setdefault(_name, _value)


def make_inputs(name, seed):
    """(the function's tensors by fla's name, an initial state), the whole
    sequence on the CPU: made there from a seeded generator, so that every
    process makes the same values. q, k, v (and DPLR's a, b) bf16; gates,
    betas and the state float32, as lina reads them."""
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    def unit(*shape):
        return F.normalize(randn(*shape), dim=-1)

    def slow(*shape):
        # Per-token decays near 1 (log decay about -0.02): the state
        # carries well past the cut, so that a rank started from the wrong
        # state is off by far more than the tolerance (checked below).
        return F.logsigmoid(randn(*shape) + 4)

    bf16 = torch.bfloat16
    x = {"q": randn(B, T, H, K).to(bf16), "k": unit(B, T, H, K).to(bf16),
         "v": randn(B, T, H, V).to(bf16)}
    if name == "chunk_simple_gla":
        x["g"] = slow(B, T, H)
    elif name == "chunk_gla":
        x["g"] = slow(B, T, H, K).clamp_min(-5)
    elif name == "chunk_delta_rule":
        x["beta"] = randn(B, T, H).sigmoid()
    elif name == "chunk_gated_delta_rule":
        x["g"] = slow(B, T, H)
        x["beta"] = randn(B, T, H).sigmoid()
    elif name == "chunk_kda":
        x["g"] = slow(B, T, H, K).clamp(-5, 0)
        x["beta"] = randn(B, T, H).sigmoid()
    elif name == "chunk_dplr_delta_rule":
        # a and b independent: a transition that is not symmetric, so that
        # a transposed T cannot pass.
        x["a"] = unit(B, T, H, K).to(bf16)
        x["b"] = (-0.5 * unit(B, T, H, K)).to(bf16)
        x["gk"] = slow(B, T, H, K)
    # chunk_retention: lina's fixed decay, no gate.
    return x, randn(B, H, K, V)


def loss_weights():
    """W for sum(o * W) over every token, U for sum(ht * U) of the final
    state: the gradient case's loss."""
    gen = torch.Generator().manual_seed(99)
    return (torch.randn(B, T, H, V, generator=gen),
            torch.randn(B, H, K, V, generator=gen))


def forward_case(name, rank, world, device):
    """This rank's outputs of ``name`` with a context from cu_seqlens."""
    fn = getattr(lina, name)
    x, h0 = make_inputs(name, seed=FUNCTIONS.index(name) + 1)
    cu = torch.tensor([0, T], dtype=torch.int64)
    ctx = lina.context_parallel.build_cp_context(
        cu.to(device), None, cu_seqlens_cpu=cu)
    mine = {n: t[:, ctx.start:ctx.end].to(device) for n, t in x.items()}
    # Only rank 0's initial state is the sequence's; the others' are not
    # read, so NaN there must not reach any output.
    state = h0 if rank == 0 else torch.full_like(h0, float("nan"))
    o, ht = fn(**mine, initial_state=state.to(device),
               output_final_state=True, cp_context=ctx,
               cu_seqlens=cu.to(device))
    return {"o": o.cpu(), "ht": ht.cpu(), "bounds": (ctx.start, ctx.end)}


def gradient_case(rank, world, device):
    """This rank's gradients of the gated delta rule with a context from
    uneven bounds: q, k, v, g, beta of its stretch, and on rank 0 the
    initial state's."""
    x, h0 = make_inputs("chunk_gated_delta_rule", seed=100)
    W, U = loss_weights()
    t0, t1 = GRAD_CUTS[world][rank], GRAD_CUTS[world][rank + 1]
    ctx = lina.context_parallel.build_cp_context(bounds=(t0, t1))
    leaves = {n: t[:, t0:t1].to(device).requires_grad_()
              for n, t in x.items()}
    h0 = h0.to(device).requires_grad_(rank == 0)
    o, ht = lina.chunk_gated_delta_rule(**leaves, initial_state=h0,
                                        output_final_state=True,
                                        cp_context=ctx)
    loss = (o.float() * W[:, t0:t1].to(device)).sum()
    if rank == world - 1:
        loss = loss + (ht * U.to(device)).sum()
    # Every rank calls backward: the exchange's backward is an all_reduce.
    loss.backward()
    grads = {n: (None if t.grad is None else t.grad.cpu())
             for n, t in leaves.items()}
    if rank == 0:
        grads["h0"] = None if h0.grad is None else h0.grad.cpu()
    return grads


def rank_main(rank, world, port, backend, devices, out_dir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # Every rank is on this host: Gloo over the loopback device, whatever
    # the host name resolves to.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    device = torch.device(devices[rank])
    torch.cuda.set_device(device)
    # A collective that waits past this raises rather than hangs (the
    # parent's deadline is the backstop).
    dist.init_process_group(backend, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    try:
        out = {name: forward_case(name, rank, world, device)
               for name in FUNCTIONS}
        out["gradients"] = gradient_case(rank, world, device)
        torch.cuda.synchronize(device)
        torch.save(out, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def placement(world):
    """(backend, each rank's device): NCCL with a GPU a rank where there
    are enough, else every rank on cuda:0 over Gloo; None where neither
    backend is built in."""
    if torch.cuda.device_count() >= world and dist.is_nccl_available():
        return "nccl", [f"cuda:{r}" for r in range(world)]
    if dist.is_gloo_available():
        return "gloo", ["cuda:0"] * world
    return None


def run_ranks(world, backend, devices):
    """Every rank's results, from ``world`` processes; fails when one
    raises (its traceback in the message) or when they are not done by the
    deadline."""
    with tempfile.TemporaryDirectory(prefix="lina-cp-gpu-") as out_dir:
        context = mp.spawn(rank_main, args=(world, free_port(), backend,
                                            devices, out_dir),
                           nprocs=world, join=False)
        deadline = time.monotonic() + TIMEOUT_S
        while not context.join(timeout=5):
            if time.monotonic() > deadline:
                for p in context.processes:
                    if p.is_alive():
                        p.kill()
                for p in context.processes:
                    p.join()
                raise AssertionError(
                    f"{world} ranks over {backend} were not done after "
                    f"{TIMEOUT_S:.0f} s (a rank waiting in a collective?); "
                    "set LINA_CP_GPU_TIMEOUT_S for a slower machine")
        return [torch.load(os.path.join(out_dir, f"rank{r}.pt"))
                for r in range(world)]


@needs_gpu
@needs_dist
class ContextParallelGpuTest(unittest.TestCase):
    """Each rank's part against the whole sequence run in this process on
    cuda:0, within the bf16 tolerance of test_gpu.py (forward) and
    test_backward_gpu.py (gradients)."""

    whole = {}  # the whole-sequence runs, made once for every world

    @classmethod
    def setUpClass(cls):
        # Imported here, not at the top: the ranks import this module, and
        # test_gpu imports fla where it finds it, which they do not need.
        from test_backward_gpu import GRAD_TOL
        from test_gpu import TOL, rel
        cls.tol, cls.grad_tol = TOL["bf16"], GRAD_TOL["bf16"]
        cls.rel = staticmethod(rel)

    def close(self, got, want, what, tol):
        self.assertIsNotNone(got, f"{what}: missing")
        self.assertEqual(tuple(got.shape), tuple(want.shape), what)
        self.assertTrue(torch.isfinite(got).all().item(), f"{what}: NaN/Inf")
        err = self.rel(got, want)
        self.assertLess(err, tol, f"{what}: relative difference {err:.2e}")

    def whole_forward(self, name):
        if name not in self.whole:
            x, h0 = make_inputs(name, seed=FUNCTIONS.index(name) + 1)
            o, ht = getattr(lina, name)(
                **{n: t.cuda() for n, t in x.items()},
                initial_state=h0.cuda(), output_final_state=True)
            self.assertTrue(torch.isfinite(o).all().item(),
                            f"{name} on the whole sequence: NaN/Inf")
            self.whole[name] = (o.cpu(), ht.cpu())
        return self.whole[name]

    def from_zero(self, name, t0):
        """``name`` on tokens [t0, T) alone, from a zero state: what a rank
        that missed the carried state would give."""
        x, _ = make_inputs(name, seed=FUNCTIONS.index(name) + 1)
        o, _ = getattr(lina, name)(**{n: t[:, t0:].cuda()
                                      for n, t in x.items()})
        return o.cpu()

    def whole_gradients(self):
        if "gradients" not in self.whole:
            x, h0 = make_inputs("chunk_gated_delta_rule", seed=100)
            W, U = loss_weights()
            leaves = {n: t.cuda().requires_grad_() for n, t in x.items()}
            leaves["h0"] = h0.cuda().requires_grad_()
            o, ht = lina.chunk_gated_delta_rule(
                **{n: t for n, t in leaves.items() if n != "h0"},
                initial_state=leaves["h0"], output_final_state=True)
            ((o.float() * W.cuda()).sum() + (ht * U.cuda()).sum()).backward()
            self.whole["gradients"] = {n: t.grad.cpu()
                                       for n, t in leaves.items()}
        return self.whole["gradients"]

    def check_world(self, world):
        where = placement(world)
        if where is None:
            self.skipTest("torch.distributed has neither NCCL nor Gloo")
        backend, devices = where
        parts = run_ranks(world, backend, devices)
        step = T // world
        for name in FUNCTIONS:
            with self.subTest(name, world=world, backend=backend):
                o, ht = self.whole_forward(name)
                got = [p[name] for p in parts]
                self.assertEqual([g["bounds"] for g in got],
                                 [(r * step, (r + 1) * step)
                                  for r in range(world)])
                for r, g in enumerate(got):
                    t0, t1 = g["bounds"]
                    self.close(g["o"], o[:, t0:t1], f"{name} rank {r} o",
                               self.tol)
                self.close(got[-1]["ht"], ht, f"{name} final state",
                           self.tol)
                # The tolerance tells a right handoff from none: the last
                # rank's stretch run from zero is far off.
                t0 = got[-1]["bounds"][0]
                off = self.rel(self.from_zero(name, t0), o[:, t0:])
                self.assertGreater(off, 2 * self.tol,
                                   f"{name}: the carried state changes the "
                                   f"last rank's outputs by only {off:.2e}")
        with self.subTest("gated delta rule gradients", world=world,
                          backend=backend):
            want = self.whole_gradients()
            grads = [p["gradients"] for p in parts]
            for n in ("q", "k", "v", "g", "beta"):
                got = [g[n] for g in grads]
                for r, t in enumerate(got):
                    self.assertIsNotNone(t, f"d{n} on rank {r}: None")
                self.close(torch.cat(got, 1), want[n], f"d{n}",
                           self.grad_tol)
            self.close(grads[0]["h0"], want["h0"], "dh0", self.grad_tol)

    def test_two_ranks(self):
        self.check_world(2)

    def test_four_ranks(self):
        found = torch.cuda.device_count()
        if found < 4:
            self.skipTest(f"four ranks need four GPUs (one a rank, over "
                          f"NCCL); found {found}")
        self.check_world(4)


if __name__ == "__main__":
    unittest.main()
