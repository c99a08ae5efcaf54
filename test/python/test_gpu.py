"""The fla-style functions on a GPU against fla's own float32 references
(fla/ops/*/naive.py, pure torch: no Triton kernels are compiled).

    python3 -m unittest discover -v -s test/python -p test_gpu.py   (repo root)

Needs torch with CUDA and liblina.so; the reference tests also need fla's
source (put `.fla/` on sys.path, as bench/compare_fla.py does, or install
fla) and einops. Without them every test is skipped, saying why.
"""
from __future__ import annotations

import glob
import os
import sys
import unittest

# test_backward_gpu.py imports torch and F from here too.
from gpu_support import F, HAVE_CUDA, REPO, lina, needs_gpu, torch

if (REPO / ".fla" / "fla").is_dir():
    sys.path.insert(0, str(REPO / ".fla"))
os.environ.setdefault("FLA_DISABLE_BACKEND_DISPATCH", "1")

HAVE_FLA = False
if HAVE_CUDA:
    try:
        import einops  # noqa: F401
    except ImportError:
        sys.path += sorted(glob.glob(str(REPO / ".whl" / "einops-*.whl")))
    try:
        from fla.ops.delta_rule.naive import delta_rule_recurrence
        from fla.ops.gated_delta_rule.gate import naive_gdn_gate
        from fla.ops.gated_delta_rule.naive import naive_recurrent_gated_delta_rule
        from fla.ops.generalized_delta_rule.dplr.naive import dplr_recurrence
        from fla.ops.gla.naive import naive_recurrent_gla
        from fla.ops.kda.gate import naive_kda_gate, naive_kda_lowerbound_gate
        from fla.ops.kda.naive import naive_recurrent_kda
        from fla.ops.retention.naive import naive_retention
        from fla.ops.simple_gla.naive import naive_recurrent_simple_gla
        HAVE_FLA = True
    except Exception as e:  # noqa: BLE001 - any import problem means "skip"
        FLA_ERROR = f"{type(e).__name__}: {e}"

needs_fla = unittest.skipUnless(HAVE_FLA, "needs fla's source (.fla/) and einops")

B, T, H, HV, K, V = 2, 67, 2, 4, 64, 64
TOL = {"f32": 5e-3, "bf16": 3e-2}


def rel(x, ref):
    x, ref = x.double(), ref.double()
    return ((x - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def grouped(t):
    """q or k [B, T, H, K] repeated for each value head (fla's GVA)."""
    return t.repeat_interleave(HV // H, dim=2)


def bhtd(t):
    return t.transpose(1, 2).contiguous()


class GpuCase(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.dev = "cuda"

    def randn(self, *shape, dtype=None):
        return torch.randn(shape, device=self.dev, dtype=dtype or torch.float32)

    def qkv(self, dtype=None, hv=HV, normalize=False):
        dtype = dtype or torch.float32
        q, k = self.randn(B, T, H, K), self.randn(B, T, H, K)
        if normalize:
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        v = self.randn(B, T, hv, V)
        return q.to(dtype), k.to(dtype), v.to(dtype)

    def close(self, got, ref, what, tol=TOL["f32"]):
        self.assertTrue(torch.isfinite(got).all().item(), f"{what}: NaN/Inf")
        err = rel(got, ref)
        self.assertLess(err, tol, f"{what}: relative difference {err:.2e}")


@needs_gpu
@needs_fla
class AgainstFlaReferences(GpuCase):
    def test_simple_gla_and_fixed_decays(self):
        q, k, v = self.qkv()
        g = F.logsigmoid(self.randn(B, T, HV))
        h0 = self.randn(B, HV, K, V)
        o, ht = lina.chunk_simple_gla(q, k, v, g, scale=0.2, initial_state=h0,
                                      output_final_state=True)
        ref, ref_ht = naive_recurrent_simple_gla(grouped(q), grouped(k), v, g,
                                                 scale=0.2, initial_state=h0)
        self.close(o, ref, "o")
        self.close(ht, ref_ht, "final state")

        gamma = torch.log(1 - 2.0 ** (-5.0 - torch.arange(HV, device=self.dev)))
        o, _ = lina.chunk_simple_gla(q, k, v, g_gamma=gamma)
        ref, _ = naive_recurrent_simple_gla(grouped(q), grouped(k), v,
                                            gamma.expand(B, T, HV))
        self.close(o, ref, "o with g_gamma")

    def test_retention(self):
        q, k, v = self.qkv(hv=H)
        o, ht = lina.chunk_retention(q, k, v)
        self.assertIsNone(ht)
        self.close(o, bhtd(naive_retention(bhtd(q), bhtd(k), bhtd(v))), "o")

    def test_gla(self):
        q, k, v = self.qkv()
        g = F.logsigmoid(self.randn(B, T, HV, K)).clamp_min(-5)
        h0 = self.randn(B, HV, K, V)
        o, ht = lina.chunk_gla(q, k, v, g, initial_state=h0,
                               output_final_state=True)
        ref, ref_ht = naive_recurrent_gla(grouped(q), grouped(k), v, g,
                                          initial_state=h0,
                                          output_final_state=True)
        self.close(o, ref, "o")
        self.close(ht, ref_ht, "final state")

    def test_delta_rule(self):
        q, k, v = self.qkv(hv=H, normalize=True)
        beta = self.randn(B, T, H).sigmoid()
        h0 = self.randn(B, H, K, V)
        o, ht = lina.chunk_delta_rule(q, k, v, beta, initial_state=h0,
                                      output_final_state=True)
        ref, ref_ht = delta_rule_recurrence(bhtd(q), bhtd(k), bhtd(v),
                                            bhtd(beta), initial_state=h0)
        self.close(o, bhtd(ref), "o")
        self.close(ht, ref_ht, "final state")

    def gdn_reference(self, q, k, v, g, beta, **kw):
        return naive_recurrent_gated_delta_rule(grouped(q), grouped(k), v, beta,
                                                g, **kw)

    def test_gated_delta_rule(self):
        q, k, v = self.qkv()
        g = F.logsigmoid(self.randn(B, T, HV))
        beta = self.randn(B, T, HV).sigmoid()
        h0 = self.randn(B, HV, K, V)
        o, ht = lina.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0,
                                            output_final_state=True,
                                            use_qk_l2norm_in_kernel=True)
        qn, kn = F.normalize(q, dim=-1, eps=1e-6), F.normalize(k, dim=-1, eps=1e-6)
        ref, ref_ht = self.gdn_reference(qn, kn, v, g, beta, initial_state=h0,
                                         output_final_state=True)
        self.close(o, ref, "o")
        self.close(ht, ref_ht, "final state")

    def test_the_mma_knob(self):
        # The scan as warpgroup products asked for and set aside (sm_90,
        # bf16, d128): both match fla's reference, and each kernel reports
        # the schedule it was built with (warpgroup's: C64 fused).
        if torch.cuda.get_device_capability() != (9, 0):
            self.skipTest("the warpgroup scan needs an sm_90 GPU")
        q = F.normalize(self.randn(B, T, H, 128), dim=-1).to(torch.bfloat16)
        k = F.normalize(self.randn(B, T, H, 128), dim=-1).to(torch.bfloat16)
        v = self.randn(B, T, HV, 128).to(torch.bfloat16)
        g = F.logsigmoid(self.randn(B, T, HV))
        beta = self.randn(B, T, HV).sigmoid()
        ref, _ = self.gdn_reference(q.float(), k.float(), v.float(), g, beta)
        for mma in ("warpgroup", "warp"):
            with self.subTest(mma=mma):
                o, _ = lina.chunk_gated_delta_rule(q, k, v, g, beta, mma=mma)
                self.close(o, ref, f"mma={mma}", TOL["bf16"])
        built = {(c.schedule["mma"], c.schedule["strategy"],
                  c.schedule["chunk_size"]) for c in lina.cached_kernels()}
        self.assertIn(("warpgroup", "fused", 64), built)
        self.assertTrue(any(m == "warp" for m, _, _ in built), built)

    def test_gated_delta_rule_in_kernel_gate_and_beta(self):
        q, k, v = self.qkv(normalize=True)
        x = self.randn(B, T, HV)
        A_log, dt_bias = self.randn(HV) * 0.5, self.randn(HV)
        beta_logits = self.randn(B, T, HV)
        for neg in (False, True):
            with self.subTest(allow_neg_eigval=neg):
                o, _ = lina.chunk_gated_delta_rule(
                    q, k, v, x, beta_logits, use_gate_in_kernel=True,
                    A_log=A_log, dt_bias=dt_bias,
                    use_beta_sigmoid_in_kernel=True, allow_neg_eigval=neg)
                beta = beta_logits.sigmoid() * (2 if neg else 1)
                ref, _ = self.gdn_reference(q, k, v,
                                            naive_gdn_gate(x, A_log, dt_bias),
                                            beta)
                self.close(o, ref, "o")

    def test_gated_delta_rule_bf16(self):
        q, k, v = self.qkv(dtype=torch.bfloat16, normalize=True)
        g = F.logsigmoid(self.randn(B, T, HV))
        beta = self.randn(B, T, HV).sigmoid()
        o, _ = lina.chunk_gated_delta_rule(q, k, v, g, beta)
        self.assertEqual(o.dtype, torch.bfloat16)
        ref, _ = self.gdn_reference(q.float(), k.float(), v.float(), g, beta)
        self.close(o, ref, "o", TOL["bf16"])

    def test_kda(self):
        q, k, v = self.qkv(normalize=True)
        g = F.logsigmoid(self.randn(B, T, HV, K))
        beta = self.randn(B, T, HV).sigmoid()
        h0 = self.randn(B, HV, K, V)
        o, ht = lina.chunk_kda(q, k, v, g, beta, initial_state=h0,
                               output_final_state=True)
        ref, ref_ht = naive_recurrent_kda(q, k, v, g, beta, initial_state=h0,
                                          output_final_state=True)
        self.close(o, ref, "o")
        self.close(ht, ref_ht, "final state")

    def test_kda_in_kernel_gates(self):
        q, k, v = self.qkv(normalize=True)
        x = self.randn(B, T, HV, K)
        beta = self.randn(B, T, HV).sigmoid()
        A_log, dt_bias = self.randn(HV) * 0.5, self.randn(HV * K)
        cases = {
            "softplus": (dict(A_log=A_log, dt_bias=dt_bias),
                         naive_kda_gate(x, A_log, dt_bias)),
            "softplus, dt_bias [HV, K]": (
                dict(A_log=A_log, dt_bias=dt_bias.view(HV, K)),
                naive_kda_gate(x, A_log, dt_bias)),
            "lower_bound": (dict(A_log=A_log, dt_bias=dt_bias, lower_bound=-5),
                            naive_kda_lowerbound_gate(x, A_log, dt_bias, -5.0)),
            "lower_bound without A_log": (
                dict(lower_bound=-3.0),
                naive_kda_lowerbound_gate(x, None, None, -3.0)),
        }
        for name, (kw, g) in cases.items():
            with self.subTest(name):
                o, _ = lina.chunk_kda(q, k, v, x, beta, use_gate_in_kernel=True,
                                      **kw)
                ref, _ = naive_recurrent_kda(q, k, v, g, beta)
                self.close(o, ref, name)

    def test_dplr(self):
        # fla's a is the read vector (a^T S) and b the write side: lina's a, b.
        q, k, v = self.qkv(hv=H)
        # a and b independent (with b = -a, as in fla's tests, b a^T is
        # symmetric and swapping them would go unnoticed).
        a = F.normalize(torch.rand(B, T, H, K, device=self.dev), dim=-1)
        b = -0.5 * F.normalize(torch.rand(B, T, H, K, device=self.dev), dim=-1)
        gk = F.logsigmoid(self.randn(B, T, H, K))
        h0 = self.randn(B, H, K, V)
        o, ht = lina.chunk_dplr_delta_rule(q, k, v, a, b, gk, initial_state=h0,
                                           output_final_state=True)
        ref, ref_ht = dplr_recurrence(bhtd(q), bhtd(k), bhtd(v), bhtd(a),
                                      bhtd(b), bhtd(gk), initial_state=h0)
        self.close(o, bhtd(ref), "o")
        self.close(ht, ref_ht, "final state")
        # Swapping a and b must change the answer (the mapping is tested).
        o_swapped, _ = lina.chunk_dplr_delta_rule(q, k, v, b, a, gk,
                                                  initial_state=h0)
        self.assertGreater(rel(o_swapped, bhtd(ref)), 10 * TOL["f32"])


@needs_gpu
class BindingBehaviour(GpuCase):
    def gdn(self, q, k, v, **kw):
        g = F.logsigmoid(self.randn(*v.shape[:3]))
        beta = self.randn(*v.shape[:3]).sigmoid()
        return g, beta, lina.chunk_gated_delta_rule(q, k, v, g, beta, **kw)

    def test_varlen_matches_separate_sequences(self):
        lengths = [5, 0, 40, 1, 21]
        Tt = sum(lengths)
        q, k = (F.normalize(self.randn(1, Tt, H, K), dim=-1) for _ in range(2))
        v = self.randn(1, Tt, HV, V)
        g = F.logsigmoid(self.randn(1, Tt, HV))
        beta = self.randn(1, Tt, HV).sigmoid()
        h0 = self.randn(len(lengths), HV, K, V)
        cu_list = [0]
        for n in lengths:
            cu_list.append(cu_list[-1] + n)
        for where, dtype in (("cuda", torch.int64), ("cpu", torch.int64),
                             ("cuda", torch.int32)):
            cu = torch.tensor(cu_list, device=where, dtype=dtype)
            with self.subTest(cu_seqlens_on=where, dtype=dtype):
                o, ht = lina.chunk_gated_delta_rule(
                    q, k, v, g, beta, initial_state=h0, output_final_state=True,
                    cu_seqlens=cu)
                for i, (s, e) in enumerate(zip(cu_list, cu_list[1:])):
                    oi, hi = lina.chunk_gated_delta_rule(
                        q[:, s:e], k[:, s:e], v[:, s:e], g[:, s:e], beta[:, s:e],
                        initial_state=h0[i:i + 1], output_final_state=True)
                    if e > s:
                        self.close(o[:, s:e], oi, f"o of sequence {i}")
                    self.close(ht[i:i + 1], hi, f"final state of sequence {i}")

    def test_packed_sequences_in_segments_match_separate_ones(self):
        # simple_gla (mamba2's additive rule) packed, in four segments a
        # sequence cut on the device by each one's length (the last pieces
        # of the short ones empty), against each sequence run alone, whole.
        # bf16: segments are for the tensor-core dtypes.
        lengths = [700, 3, 0, 260]
        Tt = sum(lengths)
        bf16 = torch.bfloat16
        q, k = (self.randn(1, Tt, H, K, dtype=bf16) for _ in range(2))
        v = self.randn(1, Tt, HV, V, dtype=bf16)
        g = F.logsigmoid(self.randn(1, Tt, HV))
        h0 = self.randn(len(lengths), HV, K, V)
        cu_list = [0]
        for n in lengths:
            cu_list.append(cu_list[-1] + n)
        cu = torch.tensor(cu_list, device="cuda")
        o, ht = lina.chunk_simple_gla(q, k, v, g, initial_state=h0,
                                      output_final_state=True, cu_seqlens=cu,
                                      strategy="split", segments=4)
        for i, (s, e) in enumerate(zip(cu_list, cu_list[1:])):
            oi, hi = lina.chunk_simple_gla(
                q[:, s:e], k[:, s:e], v[:, s:e], g[:, s:e],
                initial_state=h0[i:i + 1], output_final_state=True)
            if e > s:
                self.close(o[:, s:e], oi, f"o of sequence {i}", TOL["bf16"])
            self.close(ht[i:i + 1], hi, f"final state of sequence {i}",
                       TOL["bf16"])
        built = [k.schedule["segments"] for k in lina.cached_kernels()]
        self.assertIn(4, built)

    def test_empty_sequence_passes_the_state_through(self):
        q, k, v = (t[:, :0] for t in self.qkv(normalize=True))
        h0 = self.randn(B, HV, K, V)
        _, _, (o, ht) = self.gdn(q, k, v, initial_state=h0,
                                 output_final_state=True)
        self.assertEqual(list(o.shape), [B, 0, HV, V])
        self.assertTrue(torch.equal(ht, h0))

    def test_non_contiguous_inputs_are_copied(self):
        q, k, v = self.qkv(normalize=True)
        g = F.logsigmoid(self.randn(B, T, HV))
        beta = self.randn(B, T, HV).sigmoid()
        q_t = q.transpose(0, 1).contiguous().transpose(0, 1)   # same values
        self.assertFalse(q_t.is_contiguous())
        o1, _ = lina.chunk_gated_delta_rule(q, k, v, g, beta)
        o2, _ = lina.chunk_gated_delta_rule(q_t, k, v, g, beta)
        self.close(o2, o1, "o", 1e-6)

    def test_compiled_kernel_object(self):
        kernel = lina.compile("gdn", key_dim=K, value_dim=V, heads=H,
                              value_heads=HV, dtype="f32", initial_state=False,
                              final_state=True, qk_l2norm=False)
        self.assertEqual(kernel.fields["heads"], H)
        q, k, v = self.qkv(normalize=True)
        g = F.logsigmoid(self.randn(B, T, HV))
        beta = self.randn(B, T, HV).sigmoid()
        o = torch.empty(B, T, HV, V, device=self.dev)
        out, ht = kernel(q, k, v, g=g, beta=beta, o=o)
        self.assertIs(out, o)
        ref, ref_ht = lina.chunk_gated_delta_rule(q, k, v, g, beta,
                                                  output_final_state=True)
        self.close(out, ref, "o", 1e-6)
        self.close(ht, ref_ht, "final state", 1e-6)
        bad = torch.empty(B, HV, T, V, device=self.dev).transpose(1, 2)
        with self.assertRaisesRegex(ValueError, "'o' must be contiguous"):
            kernel(q, k, v, g=g, beta=beta, o=bad)
        with self.assertRaisesRegex(ValueError, "'g' is required"):
            kernel(q, k, v, beta=beta)

    def test_side_stream_and_schedules(self):
        q, k, v = self.qkv(normalize=True)
        g, beta, (ref, _) = self.gdn(q, k, v)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            o, _ = lina.chunk_gated_delta_rule(q, k, v, g, beta)
        torch.cuda.current_stream().wait_stream(stream)
        self.close(o, ref, "o on a side stream", 1e-6)
        for strategy in ("fused", "materialize", "split"):
            with self.subTest(strategy=strategy):
                o, _ = lina.chunk_gated_delta_rule(q, k, v, g, beta,
                                                   strategy=strategy)
                self.close(o, ref, strategy)
        # Each kernel reports the schedule it was built with, every knob set.
        built = {k.schedule["strategy"] for k in lina.cached_kernels()}
        self.assertLessEqual({"fused", "materialize", "split"}, built)
        for kernel in lina.cached_kernels():
            self.assertGreater(kernel.schedule["chunk_size"], 0)
            self.assertGreater(kernel.schedule["warps"], 0)

    def test_errors(self):
        q, k, v = self.qkv(normalize=True)
        g = F.logsigmoid(self.randn(B, T, HV))
        beta = self.randn(B, T, HV).sigmoid().requires_grad_()
        # Differentiable (test_backward_gpu.py), and not under no_grad.
        o, _ = lina.chunk_gated_delta_rule(q, k, v, g, beta)
        self.assertTrue(o.requires_grad)
        with torch.no_grad():
            o, _ = lina.chunk_gated_delta_rule(q, k, v, g, beta)
        self.assertFalse(o.requires_grad)
        with self.assertRaisesRegex(ValueError, "'q' must be on a CUDA device"):
            lina.chunk_gated_delta_rule(q.cpu(), k, v, g, beta.detach())


if __name__ == "__main__":
    unittest.main()
