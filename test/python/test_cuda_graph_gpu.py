"""Prefill and training calls in CUDA graphs and on concurrent streams, on a
GPU: the chunk functions and the backward run in workspaces from torch's
caching allocator (python/lina/workspace.py), so

- a chunk call captured in a ``torch.cuda.CUDAGraph`` and replayed with new
  inputs copied into its static tensors equals the eager call on those
  inputs, also after larger eager calls of the same kernel ran in between
  (which once reallocated the kernel's own workspace under the graph), for
  the materialize and split strategies, segments, packed sequences whose
  lengths change between replays, and on Hopper the wgmma scan that solves
  the chunks first;
- a forward and backward captured together (the whole step, as torch's
  whole-network capture) gives eager's gradients on replay;
- calls of one kernel at two shapes, issued alternately on two streams so
  that they overlap, each equal their eager results.

    python3 -m unittest discover -v -s test/python -p test_cuda_graph_gpu.py

Needs torch with CUDA and liblina.so; skipped otherwise. What each call
hands liblina is checked without a GPU by test_workspace.py.
"""
from __future__ import annotations

import unittest

from gpu_support import F, HAVE_CUDA, lina, needs_gpu, torch

B, T, H, HV, K, V = 2, 1000, 4, 4, 128, 128
# Replays run the eager call's kernels on the same inputs, so the forward
# agrees to the bit. The backward adds key-side gradients with atomics, in
# an order that differs between runs, and q's and k's come back in bf16,
# where that order can move a value by one bf16 step (2^-8): a few in a
# thousand such, nothing like memory another call overwrote.
FORWARD_TOL, BACKWARD_TOL = 1e-6, 1e-2


def rel(x, ref):
    x, ref = x.double(), ref.double()
    return ((x - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def hopper():
    return HAVE_CUDA and torch.cuda.get_device_capability() == (9, 0)


class Inputs:
    """Random inputs of one shape; ``fill(other)`` copies another draw into
    these tensors in place (what a graph's static inputs need)."""

    def __init__(self, batch=B, seq_len=T, per_channel=False):
        dev = "cuda"
        self.q = F.normalize(torch.randn(batch, seq_len, H, K, device=dev),
                             dim=-1).bfloat16()
        self.k = F.normalize(torch.randn(batch, seq_len, H, K, device=dev),
                             dim=-1).bfloat16()
        self.v = torch.randn(batch, seq_len, HV, V, device=dev).bfloat16()
        shape = (batch, seq_len, HV) + ((K,) if per_channel else ())
        self.g = F.logsigmoid(torch.randn(shape, device=dev)) / 8
        self.beta = torch.rand(batch, seq_len, HV, device=dev)
        self.h0 = torch.randn(batch, HV, K, V, device=dev) * 0.1

    def fill(self, other):
        for name, t in vars(self).items():
            t.copy_(getattr(other, name))


def gdn(**schedule):
    def call(x, h0=None, **kw):
        return lina.chunk_gated_delta_rule(
            x.q, x.k, x.v, x.g, x.beta,
            initial_state=x.h0 if h0 is None else h0,
            output_final_state=True, **schedule, **kw)
    return call


def kda(**schedule):
    def call(x, **kw):
        return lina.chunk_kda(x.q, x.k, x.v, x.g, x.beta, initial_state=x.h0,
                              output_final_state=True, **schedule, **kw)
    return call


def mamba2(**schedule):
    def call(x, **kw):
        return lina.chunk_simple_gla(x.q, x.k, x.v, x.g, initial_state=x.h0,
                                     output_final_state=True, **schedule, **kw)
    return call


# (name, call, whether gates are per channel, whether it needs sm_90)
CASES = [
    ("gdn materialize", gdn(strategy="materialize", mma="warp"), False,
     False),
    ("gdn split", gdn(strategy="split", mma="warp"), False, False),
    ("mamba2 split, 4 segments", mamba2(strategy="split", segments=4,
                                        mma="warp"), False, False),
    ("kda split", kda(strategy="split", mma="warp"), True, False),
    ("gdn warpgroup (chunks solved first)", gdn(mma="warpgroup"), False, True),
    ("kda warpgroup (chunks solved first)", kda(mma="warpgroup"), True, True),
]


def warm_up(call):
    """Runs ``call`` twice on a side stream (kernels compiled and loaded,
    constants made), as torch asks before a capture."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()


@needs_gpu
class CapturedPrefillTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)

    def test_replays_equal_eager(self):
        for name, call, per_channel, sm90 in CASES:
            if sm90 and not hopper():
                continue
            with self.subTest(name):
                static = Inputs(per_channel=per_channel)
                warm_up(lambda: call(static))
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    o, ht = call(static)
                for replay in range(3):
                    fresh = Inputs(per_channel=per_channel)
                    static.fill(fresh)
                    graph.replay()
                    # Larger calls of the same kernel, eagerly, after the
                    # replay is queued and before it is read.
                    big = Inputs(seq_len=3 * T + 77 * replay,
                                 per_channel=per_channel)
                    call(big)
                    want_o, want_ht = call(fresh)
                    torch.cuda.synchronize()
                    self.assertLess(rel(o, want_o), FORWARD_TOL,
                                    f"o, replay {replay}")
                    self.assertLess(rel(ht, want_ht), FORWARD_TOL,
                                    f"final state, replay {replay}")

    def test_packed_sequences_whose_lengths_change(self):
        # The workspace depends on the shape (tokens, sequences), not on
        # the lengths, which the kernels read on the device each replay.
        call = gdn()
        static = Inputs(batch=1, seq_len=2 * T)
        cu = torch.tensor([0, 300, 1200, 2 * T], dtype=torch.int32,
                          device="cuda")
        h0 = torch.randn(3, HV, K, V, device="cuda") * 0.1
        warm_up(lambda: call(static, h0=h0, cu_seqlens=cu))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            o, ht = call(static, h0=h0, cu_seqlens=cu)
        for bounds in ([0, 1000, 1001, 2 * T], [0, 64, 1900, 2 * T],
                       [0, 0, 2 * T - 1, 2 * T]):
            fresh = Inputs(batch=1, seq_len=2 * T)
            static.fill(fresh)
            cu.copy_(torch.tensor(bounds, dtype=torch.int32))
            graph.replay()
            want_o, want_ht = call(fresh, h0=h0, cu_seqlens=cu.clone())
            torch.cuda.synchronize()
            self.assertLess(rel(o, want_o), FORWARD_TOL, f"o, {bounds}")
            self.assertLess(rel(ht, want_ht), FORWARD_TOL,
                            f"final state, {bounds}")


@needs_gpu
class CapturedTrainingStepTest(unittest.TestCase):
    """Forward and backward in one graph: the backward's workspace comes
    from the graph's pool as the forward's does."""

    def setUp(self):
        torch.manual_seed(0)

    def gradients(self, call, x, w_o, w_ht):
        o, ht = call(x)
        ((o.float() * w_o).sum() + (ht * w_ht).sum()).backward()

    def test_replayed_gradients_equal_eager(self):
        call = gdn(strategy="split", mma="warp")
        leaves = ("q", "k", "v", "g", "beta", "h0")
        static = Inputs(batch=1, seq_len=300)
        for name in leaves:
            getattr(static, name).requires_grad_()
        w_o = torch.randn(1, 300, HV, V, device="cuda")
        w_ht = torch.randn(1, HV, K, V, device="cuda")

        def step():
            for name in leaves:
                getattr(static, name).grad = None
            self.gradients(call, static, w_o, w_ht)
        warm_up(step)
        for name in leaves:
            getattr(static, name).grad = None
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.gradients(call, static, w_o, w_ht)
        for replay in range(2):
            fresh = Inputs(batch=1, seq_len=300)
            with torch.no_grad():
                static.fill(fresh)
            graph.replay()
            for name in leaves:
                getattr(fresh, name).requires_grad_()
            self.gradients(call, fresh, w_o, w_ht)
            torch.cuda.synchronize()
            for name in leaves:
                got, want = getattr(static, name).grad, \
                    getattr(fresh, name).grad
                self.assertLess(rel(got, want), BACKWARD_TOL,
                                f"d{name}, replay {replay}")


@needs_gpu
class TwoStreamsTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)

    def test_overlapping_calls_of_one_kernel(self):
        for name, call, per_channel, sm90 in CASES:
            if sm90 and not hopper():
                continue
            with self.subTest(name):
                big = Inputs(batch=2, seq_len=4 * T, per_channel=per_channel)
                small = Inputs(batch=1, seq_len=T // 2 + 3,
                               per_channel=per_channel)
                want_big, want_small = call(big), call(small)
                torch.cuda.synchronize()
                streams = torch.cuda.Stream(), torch.cuda.Stream()
                for s in streams:
                    s.wait_stream(torch.cuda.current_stream())
                got = ([], [])
                # Alternately, so that the two streams' kernels overlap.
                for _ in range(4):
                    for s, x, out in zip(streams, (big, small), got):
                        with torch.cuda.stream(s):
                            out.append(call(x))
                torch.cuda.synchronize()
                for label, outs, want in (("big", got[0], want_big),
                                          ("small", got[1], want_small)):
                    for i, (o, ht) in enumerate(outs):
                        self.assertLess(rel(o, want[0]), FORWARD_TOL,
                                        f"{label} o, call {i}")
                        self.assertLess(rel(ht, want[1]), FORWARD_TOL,
                                        f"{label} final state, call {i}")


if __name__ == "__main__":
    unittest.main()
