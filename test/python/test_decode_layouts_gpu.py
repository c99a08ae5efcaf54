"""The decode functions on a GPU in the serving engines' layouts, against a
float64 recurrence written here in torch: packed tokens with int32 and
int64 cu_seqlens (an empty sequence among them), the state pool in [K, V]
and [V, K] order, vLLM's speculative step (a row of slots per request and
accepted counts), FlashInfer's intermediate states with
disable_state_update, fla's varlen state form, and a packed [V, K] step
replayed from a CUDA graph.

    python3 -m unittest discover -v -s test/python -p test_decode_layouts_gpu.py

Every call gets fresh random inputs and a NaN-filled output; pool slots and
buffer rows the call must not write are compared bit for bit. Needs torch
with CUDA and liblina.so; skipped otherwise.
"""
from __future__ import annotations

import unittest

from gpu_support import F, lina, needs_gpu, torch

H, HV, K, V = 2, 4, 64, 32
TOL = {torch.float32: 1e-4, torch.bfloat16: 1e-2} if torch else {}
SENTINEL = -7.25  # a value no state takes here: unwritten rows keep it


def rel(x, ref):
    x, ref = x.double(), ref.double()
    return ((x - ref).norm() / ref.norm().clamp_min(1e-30)).item()


class Problem:
    """Packed inputs of one form (gdn, kda or mamba2) for sequences of the
    given lengths: q, k [1, tokens, H, K], v [1, tokens, HV, V], g, beta."""

    def __init__(self, form, lengths, dtype, seed):
        gen = torch.Generator(device="cuda").manual_seed(seed)
        n = sum(lengths)

        def randn(*shape, dt=torch.float32):
            return torch.randn(*shape, generator=gen, device="cuda").to(dt)

        self.form, self.lengths, self.dtype = form, lengths, dtype
        self.q, self.k = randn(1, n, H, K, dt=dtype), randn(1, n, H, K, dt=dtype)
        self.v = randn(1, n, HV, V, dt=dtype)
        gate = randn(1, n, HV, K) if form == "kda" else randn(1, n, HV)
        self.g = F.logsigmoid(gate).clamp(-5, 0)
        self.beta = randn(1, n, HV).sigmoid() if form != "mamba2" else None
        self.offsets = [0]
        for length in lengths:
            self.offsets.append(self.offsets[-1] + length)

    def cu_seqlens(self, dtype=None):
        """int32 (an engine's query_start_loc) unless told otherwise."""
        return torch.tensor(self.offsets, dtype=dtype or torch.int32,
                            device="cuda")

    def call(self, **kw):
        """The fla-named function of this form on the packed inputs."""
        if self.form == "gdn":
            return lina.fused_recurrent_gated_delta_rule(
                self.q, self.k, self.v, g=self.g, beta=self.beta,
                use_qk_l2norm_in_kernel=True, **kw)
        if self.form == "kda":
            return lina.fused_recurrent_kda(
                self.q, self.k, self.v, self.g, self.beta,
                use_qk_l2norm_in_kernel=True, **kw)
        return lina.fused_recurrent_simple_gla(self.q, self.k, self.v,
                                               g=self.g, **kw)

    def step(self, S, i):
        """Token i from state S [HV, K, V] (float64): (o [HV, V], S)."""
        rep = HV // H
        q = self.q[0, i].double().repeat_interleave(rep, 0)
        k = self.k[0, i].double().repeat_interleave(rep, 0)
        v = self.v[0, i].double()
        g = self.g[0, i].double()
        if self.form != "mamba2":  # fla's l2norm, then the scale
            q = q / (q.square().sum(-1, keepdim=True) + 1e-6).sqrt()
            k = k / (k.square().sum(-1, keepdim=True) + 1e-6).sqrt()
        q = q * K ** -0.5
        S = S * (g.exp()[:, :, None] if g.dim() == 2 else
                 g.exp()[:, None, None])
        if self.beta is not None:
            u = self.beta[0, i].double()[:, None] * (
                v - torch.einsum("hk,hkv->hv", k, S))
        else:
            u = v
        S = S + k[:, :, None] * u[:, None, :]
        return torch.einsum("hk,hkv->hv", q, S), S


def reference(p, pool, slots, accepted=None, rows=None, steps=0,
              n_rows=0, disable=False):
    """docs/decode.md's pool semantics in float64: (o [1, tokens, HV, V],
    pool after, intermediate buffer contents or None). pool [S, HV, K, V]
    float64; slots a list per sequence ([B]) or of rows ([B, S])."""
    o = torch.zeros(1, p.offsets[-1], HV, V, dtype=torch.float64,
                    device="cuda")
    after = pool.clone()
    inter = (torch.full((n_rows, steps, HV, K, V), SENTINEL,
                        dtype=torch.float64, device="cuda")
             if steps else None)
    n_slots = pool.shape[0]
    for n, length in enumerate(p.lengths):
        if length == 0:
            continue
        per_token = isinstance(slots[n], list)
        if per_token:
            a = accepted[n] if accepted is not None else 1
            read = slots[n][a - 1] if 1 <= a <= len(slots[n]) else -1
        else:
            read = slots[n]
        S = (pool[read].clone() if 0 <= read < n_slots else
             torch.zeros(HV, K, V, dtype=torch.float64, device="cuda"))
        row = (rows[n] if rows is not None else
               n if per_token else slots[n])
        for t in range(length):
            i = p.offsets[n] + t
            o[0, i], S = p.step(S, i)
            if per_token and t < len(slots[n]) and \
                    0 <= slots[n][t] < n_slots:
                after[slots[n][t]] = S
            if inter is not None and 0 <= row < n_rows and t < steps:
                inter[row, t] = S
        if not per_token and not disable and 0 <= read < n_slots:
            after[read] = S
    return o, after, inter


def kv_order(x, v_first):
    """A [.., K, V] state in the order a call uses, or back: a new tensor
    either way (the call writes it, the reference reads the original)."""
    return x.transpose(-1, -2).contiguous() if v_first else x.clone()


@needs_gpu
class PackedTokensTest(unittest.TestCase):
    def run_case(self, form, dtype, v_first, cu_dtype, seed):
        p = Problem(form, [3, 0, 1, 4, 2], dtype, seed)
        # Sequence 3 has no slot; slots 2 and 6 are nobody's; sequence 1 is
        # empty (an engine's padding): its slot 5 must not change.
        slot_list = [4, 5, 0, -1, 1]
        start = torch.randn(7, HV, K, V, device="cuda")
        pool = kv_order(start, v_first)
        before = pool.clone()
        slots = torch.tensor(slot_list, dtype=torch.int32, device="cuda")
        out = torch.full_like(p.v, float("nan"))
        o, same = p.call(initial_state=pool, ssm_state_indices=slots,
                         cu_seqlens=p.cu_seqlens(cu_dtype), out=out,
                         state_v_first=v_first)
        self.assertIs(same, pool)
        self.assertIs(o, out)
        o_ref, pool_ref, _ = reference(p, start.double(), slot_list)
        self.assertLess(rel(o, o_ref), TOL[dtype])
        got = kv_order(pool, v_first)
        for s in range(7):
            if s in (4, 0, 1):
                self.assertLess(rel(got[s], pool_ref[s]), TOL[torch.float32])
            else:
                self.assertTrue(torch.equal(pool[s], before[s]), f"slot {s}")

    def test_every_form_order_and_offset_width(self):
        seed = 0
        for form in ("gdn", "kda", "mamba2"):
            for dtype in (torch.float32, torch.bfloat16):
                for v_first in (False, True):
                    seed += 1
                    cu = torch.int64 if seed % 2 else torch.int32
                    with self.subTest(form=form, dtype=dtype,
                                      v_first=v_first), torch.no_grad():
                        self.run_case(form, dtype, v_first, cu, seed)


@needs_gpu
class VllmSpeculativeStepTest(unittest.TestCase):
    def test_rows_of_slots_with_accepted_counts(self):
        # vLLM's call: packed draft tokens, a [V, K] pool, a row of 4 slots
        # per request, the accepted counts of the previous step.
        for v_first in (False, True):
            with self.subTest(v_first=v_first), torch.no_grad():
                p = Problem("gdn", [4, 3, 4], torch.bfloat16, 10 + v_first)
                rows = [[0, 1, 2, 3], [4, 5, 6, -1], [8, 9, 10, 11]]
                accepted = [2, 4, 1]
                start = torch.randn(13, HV, K, V, device="cuda")
                pool = kv_order(start, v_first)
                before = pool.clone()
                out = torch.full_like(p.v, float("nan"))
                p.call(initial_state=pool, cu_seqlens=p.cu_seqlens(),
                       ssm_state_indices=torch.tensor(
                           rows, dtype=torch.int32, device="cuda"),
                       num_accepted_tokens=torch.tensor(
                           accepted, dtype=torch.int32, device="cuda"),
                       inplace_final_state=True, state_v_first=v_first,
                       out=out)
                o_ref, pool_ref, _ = reference(p, start.double(), rows,
                                               accepted=accepted)
                self.assertLess(rel(out, o_ref), TOL[torch.bfloat16])
                got = kv_order(pool, v_first)
                # Sequence 1 has 3 tokens: slot 6 is its last, slot 7 and
                # slot 12 are nobody's.
                written = [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11]
                for s in range(13):
                    if s in written:
                        self.assertLess(rel(got[s], pool_ref[s]), 1e-4,
                                        f"slot {s}")
                    else:
                        self.assertTrue(torch.equal(pool[s], before[s]))


@needs_gpu
class IntermediateStatesTest(unittest.TestCase):
    def check(self, p, v_first, rows=None, n_rows=6, steps=4, disable=True,
              **kw):
        slot_list = [2, 0, 5]
        start = torch.randn(6, HV, K, V, device="cuda")
        pool = kv_order(start, v_first)
        before = pool.clone()
        buffer = torch.full((n_rows, steps, HV, *((V, K) if v_first
                                                  else (K, V))),
                            SENTINEL, device="cuda")
        out = torch.full_like(p.v, float("nan"))
        p.call(initial_state=pool, out=out, state_v_first=v_first,
               ssm_state_indices=torch.tensor(slot_list, dtype=torch.int32,
                                              device="cuda"),
               intermediate_states_buffer=buffer, disable_state_update=disable,
               intermediate_state_indices=(
                   None if rows is None else
                   torch.tensor(rows, dtype=torch.int32, device="cuda")),
               **kw)
        o_ref, pool_ref, inter_ref = reference(
            p, start.double(), slot_list, rows=rows, steps=steps,
            n_rows=n_rows, disable=disable)
        self.assertLess(rel(out.reshape(o_ref.shape), o_ref), TOL[p.dtype])
        if disable:
            self.assertTrue(torch.equal(pool, before))
        else:
            self.assertLess(rel(kv_order(pool, v_first), pool_ref), 1e-4)
        got = kv_order(buffer, v_first).double()
        kept = inter_ref != SENTINEL
        self.assertTrue(torch.equal(got[~kept], inter_ref[~kept]))
        self.assertLess(rel(got[kept], inter_ref[kept]), 1e-4)

    def test_flashinfer_verification(self):
        # [B, T] draft tokens, states per token in the rows of the
        # sequences' slots, the pool left alone.
        with torch.no_grad():
            for v_first in (False, True):
                with self.subTest(v_first=v_first):
                    p = Problem("gdn", [4, 4, 4], torch.bfloat16, 20 + v_first)
                    for x in ("q", "k", "v", "g", "beta"):
                        setattr(p, x, getattr(p, x).reshape(
                            3, 4, *getattr(p, x).shape[2:]))
                    self.check(BatchView(p), v_first)

    def test_packed_with_rows_of_their_own(self):
        # Rows from intermediate_state_indices (one out of range), a
        # sequence longer than the buffer's steps, the pool updated.
        with torch.no_grad():
            p = Problem("kda", [3, 1, 3], torch.float32, 30)
            self.check(p, False, rows=[1, 7, 0], n_rows=2, steps=2,
                       disable=False, cu_seqlens=p.cu_seqlens())


class BatchView:
    """A Problem whose tensors are [B, T, ...] (each sequence one row) but
    whose reference reads them packed."""

    def __init__(self, p):
        self.p = p
        self.lengths, self.offsets, self.dtype = p.lengths, p.offsets, p.dtype

    @property
    def v(self):
        return self.p.v

    def call(self, **kw):
        return self.p.call(**kw)

    def step(self, S, i):
        packed = Problem.__new__(Problem)
        packed.__dict__.update(self.p.__dict__)
        for x in ("q", "k", "v", "g", "beta"):
            t = getattr(self.p, x)
            setattr(packed, x, None if t is None else
                    t.reshape(1, -1, *t.shape[2:]))
        return Problem.step(packed, S, i)


@needs_gpu
class FlaVarlenFormTest(unittest.TestCase):
    def test_a_state_per_sequence_in_and_out(self):
        with torch.no_grad():
            for v_first in (False, True):
                with self.subTest(v_first=v_first):
                    p = Problem("kda", [2, 5, 1], torch.bfloat16,
                                40 + v_first)
                    h0 = torch.randn(3, HV, K, V, device="cuda")
                    out = torch.full_like(p.v, float("nan"))
                    _, ht = p.call(initial_state=kv_order(h0, v_first),
                                   output_final_state=True, out=out,
                                   cu_seqlens=p.cu_seqlens(torch.int64),
                                   state_v_first=v_first)
                    o_ref, s_ref, _ = reference(p, h0.double(), [0, 1, 2])
                    self.assertLess(rel(out, o_ref), TOL[torch.bfloat16])
                    self.assertLess(rel(kv_order(ht, v_first), s_ref), 1e-4)


@needs_gpu
class PackedCudaGraphTest(unittest.TestCase):
    def test_a_captured_packed_step_equals_the_eager_one(self):
        with torch.no_grad():
            p = Problem("gdn", [1, 1, 0, 1], torch.bfloat16, 50)
            start = torch.randn(5, HV, V, K, device="cuda")
            slots = torch.tensor([3, 0, -1, 4], dtype=torch.int32,
                                 device="cuda")
            cu = p.cu_seqlens()
            out = torch.empty_like(p.v)
            pool = start.clone()
            fresh = [Problem("gdn", [1, 1, 0, 1], torch.bfloat16, 51 + i)
                     for i in range(3)]

            def step():
                p.call(initial_state=pool, ssm_state_indices=slots,
                       cu_seqlens=cu, state_v_first=True, out=out)

            step()  # compiles outside the capture
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step()
            pool.copy_(start)
            graphed = []
            for f in fresh:
                for x in ("q", "k", "v", "g", "beta"):
                    getattr(p, x).copy_(getattr(f, x))
                graph.replay()
                graphed.append(out.clone())
            graph_pool = pool.clone()
            pool.copy_(start)
            for i, f in enumerate(fresh):
                o, _ = f.call(initial_state=pool, ssm_state_indices=slots,
                              cu_seqlens=cu, state_v_first=True)
                self.assertTrue(torch.equal(o, graphed[i]), f"step {i}")
            self.assertTrue(torch.equal(pool, graph_pool))


if __name__ == "__main__":
    unittest.main()
