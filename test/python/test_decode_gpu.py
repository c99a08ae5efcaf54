"""The decode functions on a GPU against lina's chunk functions: a prompt
prefilled by chunk_* and continued token by token with fused_recurrent_*
through a state pool must equal chunk_* over the whole sequence; a
speculative step must continue from the accepted prefix; a step captured in
a CUDA graph must equal the eager step.

    python3 -m unittest discover -v -s test/python -p test_decode_gpu.py

Needs torch with CUDA and liblina.so (not fla); skipped otherwise. The chunk
functions are themselves checked against the float64 reference by
lina-gpu-suite and against fla by test_gpu.py.
"""
from __future__ import annotations

import unittest

from gpu_support import F, lina, needs_gpu, torch

B, H, HV, K, V = 2, 2, 4, 64, 64
P, N = 37, 5            # prefill tokens, then decoded one by one
TOL = {"f32": 5e-3, "bf16": 3e-2}
DTYPES = {"f32": "float32", "bf16": "bfloat16"}


def rel(x, ref):
    x, ref = x.double(), ref.double()
    return ((x - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def inputs(form, T, dtype, seed=0):
    """(common tensors, gate keywords for chunk_*, for fused_recurrent_*)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    dt = getattr(torch, DTYPES[dtype])

    def randn(*shape, dtype=dt):
        return torch.randn(*shape, generator=g, device="cuda", dtype=dtype)

    q, k, v = randn(B, T, H, K), randn(B, T, H, K), randn(B, T, HV, V)
    f32 = torch.float32
    t = {"q": q, "k": k, "v": v}
    chunk, fused = {}, {}
    if form in ("gdn", "mamba2"):
        chunk["g"] = fused["g"] = F.logsigmoid(randn(B, T, HV, dtype=f32))
    if form in ("kda", "gla", "rwkv7"):
        gk = F.logsigmoid(randn(B, T, HV, K, dtype=f32)).clamp(-5, 0)
        if form == "rwkv7":
            chunk["gk"] = fused["gk"] = gk
        elif form == "gla":
            chunk["g"], fused["gk"] = gk, gk
        else:
            chunk["g"] = fused["g"] = gk
    if form in ("gdn", "kda", "deltanet"):
        chunk["beta"] = fused["beta"] = randn(B, T, HV, dtype=f32).sigmoid()
        chunk["use_qk_l2norm_in_kernel"] = True
        fused["use_qk_l2norm_in_kernel"] = True
    if form == "rwkv7":
        a = F.normalize(torch.rand(B, T, HV, K, generator=g, device="cuda"),
                        dim=-1)
        b = -a * randn(B, T, HV, 1, dtype=f32).sigmoid()
        chunk["a"] = fused["a"] = a.to(dt)
        chunk["b"] = fused["b"] = b.to(dt)
    return t, chunk, fused


FORMS = {  # form: (chunk function, fused_recurrent function)
    "linear_attn": ("chunk_simple_gla", "fused_recurrent_simple_gla"),
    "retnet": ("chunk_retention", "fused_recurrent_retention"),
    "mamba2": ("chunk_simple_gla", "fused_recurrent_simple_gla"),
    "gla": ("chunk_gla", "fused_recurrent_gla"),
    "deltanet": ("chunk_delta_rule", "fused_recurrent_delta_rule"),
    "gdn": ("chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule"),
    "kda": ("chunk_kda", "fused_recurrent_kda"),
    "rwkv7": ("chunk_dplr_delta_rule", "fused_recurrent_dplr_delta_rule"),
}


def tokens(d, t0, t1):
    """Tokens [t0, t1) of every [B, T, ...] tensor in d."""
    return {n: (x[:, t0:t1].contiguous()
                if torch.is_tensor(x) and x.dim() >= 3 else x)
            for n, x in d.items()}


@needs_gpu
class PrefillThenDecodeTest(unittest.TestCase):
    def test_every_form(self):
        for form, (chunk_name, fused_name) in FORMS.items():
            for dtype in ("f32", "bf16"):
                with self.subTest(form=form, dtype=dtype), torch.no_grad():
                    self.check(form, getattr(lina, chunk_name),
                               getattr(lina, fused_name), dtype)

    def check(self, form, chunk, fused, dtype):
        t, ck, fk = inputs(form, P + N, dtype)
        h0 = torch.randn(B, HV, K, V, device="cuda")
        o_all, s_all = chunk(**t, **ck, initial_state=h0,
                             output_final_state=True)
        o_p, s_p = chunk(**tokens(t, 0, P), **tokens(ck, 0, P),
                         initial_state=h0, output_final_state=True)
        # Sequence 0 in slot 2, sequence 1 in slot 0; slot 1 is someone else's.
        pool = torch.zeros(B + 1, HV, K, V, device="cuda")
        other = torch.randn(HV, K, V, device="cuda")
        pool[1] = other
        slots = torch.tensor([2, 0], dtype=torch.int32, device="cuda")
        pool[slots.long()] = s_p
        outs = [o_p]
        for step in range(P, P + N):
            o, same = fused(**tokens(t, step, step + 1),
                            **tokens(fk, step, step + 1), initial_state=pool,
                            ssm_state_indices=slots)
            self.assertIs(same, pool)
            outs.append(o)
        o = torch.cat(outs, dim=1)
        tol = TOL[dtype]
        self.assertLess(rel(o, o_all), tol)
        self.assertLess(rel(pool[slots.long()], s_all), tol)
        self.assertTrue(torch.equal(pool[1], other))
        # fla's form from the prefill state: the same last token.
        o_f, s_f = fused(**tokens(t, P, P + N), **tokens(fk, P, P + N),
                         initial_state=s_p, output_final_state=True)
        self.assertLess(rel(o_f, o_all[:, P:]), tol)
        self.assertLess(rel(s_f, s_all), tol)


@needs_gpu
class SpeculativeDecodingTest(unittest.TestCase):
    def test_the_next_step_starts_after_the_accepted_prefix(self):
        D = 3  # draft tokens per step
        with torch.no_grad():
            t, ck, fk = inputs("gdn", P + 2 * D, "f32", seed=1)
            chunk, fused = lina.chunk_gated_delta_rule, \
                lina.fused_recurrent_gated_delta_rule
            _, s_p = chunk(**tokens(t, 0, P), **tokens(ck, 0, P),
                           output_final_state=True)
            # Each sequence owns a row of D slots; the prefill state goes in
            # the first, which an accepted count of 1 reads.
            rows = torch.tensor([[0, 1, 2], [3, 4, 5]], dtype=torch.int32,
                                device="cuda")
            pool = torch.zeros(6, HV, K, V, device="cuda")
            pool[rows[:, 0].long()] = s_p
            ones = torch.ones(B, dtype=torch.int32, device="cuda")
            fused(**tokens(t, P, P + D), **tokens(fk, P, P + D),
                  initial_state=pool, ssm_state_indices=rows,
                  num_accepted_tokens=ones)
            # Verification accepted 2 draft tokens of sequence 0 and 3 of
            # sequence 1; the next step continues from there.
            accepted = torch.tensor([2, 3], dtype=torch.int32, device="cuda")
            t2, fk2 = tokens(t, P + D, P + 2 * D), tokens(fk, P + D, P + 2 * D)
            o_next, _ = fused(**t2, **fk2, initial_state=pool,
                              ssm_state_indices=rows,
                              num_accepted_tokens=accepted)
            for n, a in enumerate((2, 3)):
                seq = {k: (v[n:n + 1] if torch.is_tensor(v) else v)
                       for k, v in {**t, **ck}.items()}
                prefix = tokens(seq, 0, P + a)
                new = tokens(seq, P + D, P + 2 * D)
                joined = {k: (torch.cat([prefix[k], new[k]], dim=1)
                              if torch.is_tensor(prefix[k]) else prefix[k])
                          for k in prefix}
                o_ref, s_ref = chunk(**joined, output_final_state=True)
                self.assertLess(rel(o_next[n:n + 1], o_ref[:, P + a:]), 5e-3)
                self.assertLess(rel(pool[rows[n, D - 1].long()], s_ref[0]),
                                5e-3)


@needs_gpu
class CudaGraphTest(unittest.TestCase):
    def test_a_captured_step_equals_the_eager_step(self):
        with torch.no_grad():
            t, _, fk = inputs("kda", 4, "bf16", seed=2)
            fused = lina.fused_recurrent_kda
            start = torch.randn(B + 1, HV, K, V, device="cuda")
            slots = torch.tensor([1, 2], dtype=torch.int32, device="cuda")
            static = tokens({**t, **fk}, 0, 1)
            out = torch.empty_like(static["v"])
            pool = start.clone()

            def step():
                fused(**static, initial_state=pool, ssm_state_indices=slots,
                      out=out)

            step()  # compiles outside the capture
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step()
            pool.copy_(start)
            graphed = []
            for i in range(4):
                for name, x in tokens({**t, **fk}, i, i + 1).items():
                    if torch.is_tensor(x):
                        static[name].copy_(x)
                graph.replay()
                graphed.append(out.clone())
            graph_pool = pool.clone()

            pool.copy_(start)
            for i in range(4):
                o, _ = fused(**tokens({**t, **fk}, i, i + 1),
                             initial_state=pool, ssm_state_indices=slots)
                self.assertTrue(torch.equal(o, graphed[i]), f"step {i}")
            self.assertTrue(torch.equal(pool, graph_pool))


if __name__ == "__main__":
    unittest.main()
