"""The fla-named functions' gradients on a GPU against autograd through fla's
naive references (fla/ops/*/naive.py, pure torch, float32): every input
that has a gradient, for every preset, with and without states, gates
computed in the kernel, grouped value heads, varlen and bf16.

    python3 -m unittest discover -v -s test/python -p test_backward_gpu.py

Needs what test_gpu.py needs (torch with CUDA, liblina.so, fla's source
and einops); without them every test is skipped, saying why.
"""
from __future__ import annotations

import unittest

import test_gpu as ref
from test_gpu import B, H, HV, K, V, bhtd, grouped, needs_fla, needs_gpu

import lina  # noqa: E402  (test_gpu put python/ on sys.path)

torch, F = ref.torch, ref.F
T = 100  # more than one chunk, not a multiple of one
GRAD_TOL = {"f32": 1e-2, "bf16": 5e-2}


class GradientCase(unittest.TestCase):
    dev = "cuda"

    def setUp(self):
        torch.manual_seed(0)

    def randn(self, *shape):
        return torch.randn(shape, device=self.dev)

    def qkv(self, hv=HV, normalize=False):
        q, k = self.randn(B, T, H, K), self.randn(B, T, H, K)
        if normalize:
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        return q, k, self.randn(B, T, hv, V)

    def check(self, ours, theirs, inputs, tol=GRAD_TOL["f32"], qkv_dtype=None,
              use_o=True):
        """Gradients of a random linear function of (o, final state) through
        ``ours`` (lina) and ``theirs`` (the reference), each called with a
        dict of fresh leaves made from ``inputs``, must agree for every
        input, and come back in its dtype. ``qkv_dtype``: what lina's q, k
        and v are (the reference gets the same values in float32);
        ``use_o=False`` leaves o out of the function (its gradient None)."""
        mine = {n: t.detach().to(qkv_dtype if qkv_dtype and n in ("q", "k",
                                                                  "v")
                                 else t.dtype).requires_grad_()
                for n, t in inputs.items()}
        refs = {n: t.detach().float().requires_grad_() for n, t in mine.items()}
        o, ht = ours(**mine)
        o_ref, ht_ref = theirs(**refs)
        loss = loss_ref = 0
        if use_o:
            w = torch.randn_like(o_ref).to(o.dtype).float()
            loss, loss_ref = (o.float() * w).sum(), (o_ref.float() * w).sum()
        if ht_ref is not None:
            self.assertIsNotNone(ht, "lina returned no final state")
            wh = torch.randn_like(ht_ref)
            loss, loss_ref = loss + (ht * wh).sum(), loss_ref + (ht_ref * wh).sum()
        loss.backward()
        loss_ref.backward()
        for name in inputs:
            got, want = mine[name].grad, refs[name].grad
            with self.subTest(gradient=name):
                if want is None:  # no path to the loss (q without o)
                    self.assertTrue(got is None or not got.any().item(),
                                    f"d{name} must be zero")
                    continue
                self.assertIsNotNone(got, f"d{name} is None")
                self.assertEqual(got.dtype, mine[name].dtype)
                self.assertEqual(got.shape, mine[name].shape)
                self.assertTrue(torch.isfinite(got).all().item(),
                                f"d{name}: NaN/Inf")
                err = ref.rel(got, want)
                self.assertLess(err, tol, f"d{name}: relative difference "
                                f"{err:.2e}")


@needs_gpu
@needs_fla
class GradientsAgainstFlaReferences(GradientCase):
    def test_simple_gla(self):
        q, k, v = self.qkv()
        inputs = dict(q=q, k=k, v=v, g=F.logsigmoid(self.randn(B, T, HV)),
                      h0=self.randn(B, HV, K, V))
        self.check(
            lambda q, k, v, g, h0: lina.chunk_simple_gla(
                q, k, v, g, scale=0.2, initial_state=h0,
                output_final_state=True),
            lambda q, k, v, g, h0: ref.naive_recurrent_simple_gla(
                grouped(q), grouped(k), v, g, scale=0.2, initial_state=h0),
            inputs)

    def test_simple_gla_g_gamma(self):
        q, k, v = self.qkv()
        gamma = torch.log(1 - 2.0 ** (-5.0 - torch.arange(HV, device=self.dev)))
        self.check(
            lambda q, k, v, gamma: (lina.chunk_simple_gla(
                q, k, v, g_gamma=gamma)[0], None),
            lambda q, k, v, gamma: (ref.naive_recurrent_simple_gla(
                grouped(q), grouped(k), v, gamma.expand(B, T, HV))[0], None),
            dict(q=q, k=k, v=v, gamma=gamma))

    def test_retention(self):
        # The decay is lina's constant: q, k and v only.
        q, k, v = self.qkv(hv=H)
        self.check(
            lambda q, k, v: lina.chunk_retention(q, k, v),
            lambda q, k, v: (bhtd(ref.naive_retention(bhtd(q), bhtd(k),
                                                      bhtd(v))), None),
            dict(q=q, k=k, v=v))

    def test_gla(self):
        q, k, v = self.qkv()
        g = F.logsigmoid(self.randn(B, T, HV, K)).clamp_min(-5)
        self.check(
            lambda q, k, v, g, h0: lina.chunk_gla(
                q, k, v, g, initial_state=h0, output_final_state=True),
            lambda q, k, v, g, h0: ref.naive_recurrent_gla(
                grouped(q), grouped(k), v, g, initial_state=h0,
                output_final_state=True),
            dict(q=q, k=k, v=v, g=g, h0=self.randn(B, HV, K, V)))

    def test_delta_rule(self):
        q, k, v = self.qkv(hv=H, normalize=True)
        self.check(
            lambda q, k, v, beta, h0: lina.chunk_delta_rule(
                q, k, v, beta, initial_state=h0, output_final_state=True),
            lambda q, k, v, beta, h0: (lambda o, ht: (bhtd(o), ht))(
                *ref.delta_rule_recurrence(bhtd(q), bhtd(k), bhtd(v),
                                           bhtd(beta), initial_state=h0)),
            dict(q=q, k=k, v=v, beta=self.randn(B, T, H).sigmoid(),
                 h0=self.randn(B, H, K, V)))

    def gdn_reference(self, q, k, v, g, beta, **kw):
        return ref.naive_recurrent_gated_delta_rule(grouped(q), grouped(k), v,
                                                    beta, g, **kw)

    def test_gated_delta_rule_with_l2norm(self):
        q, k, v = self.qkv()
        self.check(
            lambda q, k, v, g, beta, h0: lina.chunk_gated_delta_rule(
                q, k, v, g, beta, initial_state=h0, output_final_state=True,
                use_qk_l2norm_in_kernel=True),
            lambda q, k, v, g, beta, h0: self.gdn_reference(
                F.normalize(q, dim=-1, eps=1e-6),
                F.normalize(k, dim=-1, eps=1e-6), v, g, beta,
                initial_state=h0, output_final_state=True),
            dict(q=q, k=k, v=v, g=F.logsigmoid(self.randn(B, T, HV)),
                 beta=self.randn(B, T, HV).sigmoid(),
                 h0=self.randn(B, HV, K, V)))

    def test_gated_delta_rule_gate_and_beta_in_kernel(self):
        q, k, v = self.qkv(normalize=True)
        for neg in (False, True):
            with self.subTest(allow_neg_eigval=neg):
                self.check(
                    lambda q, k, v, x, A_log, dt_bias, b: (
                        lina.chunk_gated_delta_rule(
                            q, k, v, x, b, use_gate_in_kernel=True,
                            A_log=A_log, dt_bias=dt_bias,
                            use_beta_sigmoid_in_kernel=True,
                            allow_neg_eigval=neg)),
                    lambda q, k, v, x, A_log, dt_bias, b: self.gdn_reference(
                        q, k, v, ref.naive_gdn_gate(x, A_log, dt_bias),
                        b.sigmoid() * (2 if neg else 1)),
                    dict(q=q, k=k, v=v, x=self.randn(B, T, HV),
                         A_log=self.randn(HV) * 0.5, dt_bias=self.randn(HV),
                         b=self.randn(B, T, HV)))

    def test_gated_delta_rule_bf16(self):
        # Gradients come back in each input's dtype: bf16 for q, k, v.
        q, k, v = self.qkv(normalize=True)
        self.check(
            lambda q, k, v, g, beta: lina.chunk_gated_delta_rule(
                q, k, v, g, beta),
            lambda q, k, v, g, beta: (self.gdn_reference(q, k, v, g,
                                                         beta)[0], None),
            dict(q=q, k=k, v=v, g=F.logsigmoid(self.randn(B, T, HV)),
                 beta=self.randn(B, T, HV).sigmoid()),
            tol=GRAD_TOL["bf16"], qkv_dtype=torch.bfloat16)

    def test_kda(self):
        q, k, v = self.qkv(normalize=True)
        self.check(
            lambda q, k, v, g, beta, h0: lina.chunk_kda(
                q, k, v, g, beta, initial_state=h0, output_final_state=True),
            lambda q, k, v, g, beta, h0: ref.naive_recurrent_kda(
                q, k, v, g, beta, initial_state=h0, output_final_state=True),
            dict(q=q, k=k, v=v, g=F.logsigmoid(self.randn(B, T, HV, K)),
                 beta=self.randn(B, T, HV).sigmoid(),
                 h0=self.randn(B, HV, K, V)))

    def test_kda_gates_in_kernel(self):
        q, k, v = self.qkv(normalize=True)
        base = dict(q=q, k=k, v=v, x=self.randn(B, T, HV, K),
                    beta=self.randn(B, T, HV).sigmoid())
        A_log, dt_bias = self.randn(HV) * 0.5, self.randn(HV, K)
        cases = {
            # dt_bias [HV, K]: its gradient keeps that shape.
            "softplus": (dict(A_log=A_log, dt_bias=dt_bias), {},
                         lambda x, A_log, dt_bias: ref.naive_kda_gate(
                             x, A_log, dt_bias.flatten())),
            "lower_bound": (dict(A_log=A_log, dt_bias=dt_bias),
                            dict(lower_bound=-5.0),
                            lambda x, A_log, dt_bias:
                            ref.naive_kda_lowerbound_gate(
                                x, A_log, dt_bias.flatten(), -5.0)),
            # Without A_log lina reads zeros (exp(0) = 1): no gradient.
            "lower_bound without A_log": (dict(dt_bias=dt_bias),
                                          dict(lower_bound=-3.0),
                                          lambda x, dt_bias:
                                          ref.naive_kda_lowerbound_gate(
                                              x, None, dt_bias.flatten(),
                                              -3.0)),
        }
        for name, (params, kw, gate) in cases.items():
            with self.subTest(name):
                self.check(
                    lambda q, k, v, x, beta, **p: lina.chunk_kda(
                        q, k, v, x, beta, use_gate_in_kernel=True, **p, **kw),
                    lambda q, k, v, x, beta, **p: (ref.naive_recurrent_kda(
                        q, k, v, gate(x, **p), beta)[0], None),
                    dict(base, **params))

    def test_dplr(self):
        q, k, v = self.qkv(hv=H)
        a = F.normalize(torch.rand(B, T, H, K, device=self.dev), dim=-1)
        b = -0.5 * F.normalize(torch.rand(B, T, H, K, device=self.dev), dim=-1)
        self.check(
            lambda q, k, v, a, b, gk, h0: lina.chunk_dplr_delta_rule(
                q, k, v, a, b, gk, initial_state=h0, output_final_state=True),
            lambda q, k, v, a, b, gk, h0: (lambda o, ht: (bhtd(o), ht))(
                *ref.dplr_recurrence(bhtd(q), bhtd(k), bhtd(v), bhtd(a),
                                     bhtd(b), bhtd(gk), initial_state=h0)),
            dict(q=q, k=k, v=v, a=a, b=b,
                 gk=F.logsigmoid(self.randn(B, T, H, K)),
                 h0=self.randn(B, H, K, V)))


@needs_gpu
class GradientBehaviour(GradientCase):
    def gdn_inputs(self, batch=B, Tt=T, N=B):
        q, k = (F.normalize(self.randn(batch, Tt, H, K), dim=-1)
                for _ in range(2))
        return dict(q=q, k=k, v=self.randn(batch, Tt, HV, V),
                    g=F.logsigmoid(self.randn(batch, Tt, HV)),
                    beta=self.randn(batch, Tt, HV).sigmoid(),
                    h0=self.randn(N, HV, K, V))

    def gdn(self, q, k, v, g, beta, h0, **kw):
        return lina.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=h0,
                                           output_final_state=True, **kw)

    def gdn_reference(self, q, k, v, g, beta, h0):
        return ref.naive_recurrent_gated_delta_rule(
            grouped(q), grouped(k), v, beta, g, initial_state=h0,
            output_final_state=True)

    def test_varlen_matches_separate_sequences(self):
        lengths = [5, 0, 70, 1, 24]
        ends = torch.tensor(lengths).cumsum(0).tolist()
        cu = torch.tensor([0] + ends, device=self.dev)

        def separate(q, k, v, g, beta, h0):
            outs, states = [], []
            for i, (s, e) in enumerate(zip([0] + ends, ends)):
                o, ht = self.gdn(q[:, s:e], k[:, s:e], v[:, s:e], g[:, s:e],
                                 beta[:, s:e], h0[i:i + 1])
                outs.append(o)
                states.append(ht)
            return torch.cat(outs, 1), torch.cat(states, 0)

        self.check(lambda **x: self.gdn(**x, cu_seqlens=cu), separate,
                   self.gdn_inputs(1, sum(lengths), len(lengths)), tol=1e-4)

    def test_only_the_final_state_in_the_loss(self):
        # o unused: its gradient reaches the backward as None (zero).
        self.check(self.gdn, self.gdn_reference, self.gdn_inputs(),
                   use_o=False)

    def test_no_tokens_passes_the_state_gradient_through(self):
        x = self.gdn_inputs(Tt=0)
        h0 = x["h0"].requires_grad_()
        _, ht = lina.chunk_gated_delta_rule(x["q"], x["k"], x["v"], x["g"],
                                            x["beta"], initial_state=h0,
                                            output_final_state=True)
        w = torch.randn_like(ht)
        (ht * w).sum().backward()
        self.assertTrue(torch.equal(h0.grad, w))

    def test_a_compiled_kernel_has_no_backward(self):
        kernel = lina.compile("gdn", key_dim=K, value_dim=V, heads=H,
                              value_heads=HV, dtype="f32", initial_state=False,
                              final_state=False, qk_l2norm=False)
        x = self.gdn_inputs()
        with self.assertRaisesRegex(lina.LinaError, "use the fla-named "
                                    "functions"):
            kernel(x["q"], x["k"], x["v"].requires_grad_(), g=x["g"],
                   beta=x["beta"])


if __name__ == "__main__":
    unittest.main()
