"""torch.compile(fullgraph=True) of models that call lina, on a GPU, against
the same calls in eager mode: lina's kernels through the lina:: custom ops
(python/lina/torch_ops.py), inside graphs that inductor compiles.

    python3 -m unittest discover -v -s test/python -p test_compile_gpu.py

- a Gated DeltaNet block (projections, lina.chunk_gated_delta_rule with an
  initial and a final state, a projection): outputs and every parameter's
  gradient equal eager's;
- each chunk function compiled alone, forward;
- a decode step through a state pool (the op mutates it): the compiled step
  leaves the pool eager's step leaves, and returns the same output.

Needs torch with CUDA and liblina.so (not fla); skipped otherwise. The
tracing itself is checked without a GPU by test_torch_ops.py.
"""
from __future__ import annotations

import unittest

from gpu_support import F, HAVE_CUDA, HAVE_LIB, lina, torch

needs_gpu = unittest.skipUnless(
    HAVE_CUDA and HAVE_LIB and lina.torch_ops.REGISTERED,
    "needs torch (2.4 or later) with CUDA, and liblina.so")

B, T, H, HV, K, V, D = 2, 100, 2, 4, 64, 64, 128
# Same kernels, same inputs: what differs is the code around them, which
# inductor fuses differently from eager (bf16 projections).
TOL = 2e-2


def rel(x, ref):
    x, ref = x.double(), ref.double()
    return ((x - ref).norm() / ref.norm().clamp_min(1e-30)).item()


class Block(torch.nn.Module if torch is not None else object):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(D, 2 * H * K + HV * V)
        self.gb = torch.nn.Linear(D, 2 * HV)
        self.out = torch.nn.Linear(HV * V, D)

    def forward(self, x, h0):
        b, t = x.shape[:2]
        q, k, v = self.qkv(x).split([H * K, H * K, HV * V], -1)
        q = F.normalize(q.reshape(b, t, H, K), dim=-1).bfloat16()
        k = F.normalize(k.reshape(b, t, H, K), dim=-1).bfloat16()
        g, beta = self.gb(x).chunk(2, dim=-1)
        o, ht = lina.chunk_gated_delta_rule(
            q, k, v.reshape(b, t, HV, V).bfloat16(), F.logsigmoid(g),
            beta.sigmoid(), initial_state=h0, output_final_state=True)
        return self.out(o.reshape(b, t, HV * V).float()), ht


@needs_gpu
class CompiledAgainstEagerTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        torch._dynamo.reset()

    def test_a_block_forward_and_backward(self):
        block = Block().cuda()
        x = torch.randn(B, T, D, device="cuda")
        h0 = torch.randn(B, HV, K, V, device="cuda") * 0.1

        def step(model):
            model.zero_grad()
            h = h0.clone().requires_grad_()
            y, ht = model(x, h)
            (y.square().mean() + ht.square().mean()).backward()
            grads = {n: p.grad.clone() for n, p in block.named_parameters()}
            return y.detach(), ht.detach(), h.grad, grads

        eager = step(block)
        compiled = step(torch.compile(block, fullgraph=True))
        for name, a, b in (("y", compiled[0], eager[0]),
                           ("ht", compiled[1], eager[1]),
                           ("h0.grad", compiled[2], eager[2])):
            self.assertLess(rel(a, b), TOL, name)
        for name in eager[3]:
            self.assertLess(rel(compiled[3][name], eager[3][name]), TOL, name)

    def test_each_chunk_function(self):
        q = F.normalize(torch.randn(B, T, H, K, device="cuda"), dim=-1)
        k = F.normalize(torch.randn(B, T, H, K, device="cuda"), dim=-1)
        v = torch.randn(B, T, HV, V, device="cuda")
        g3 = F.logsigmoid(torch.randn(B, T, HV, device="cuda"))
        g4 = F.logsigmoid(torch.randn(B, T, HV, K, device="cuda")) / 8
        beta = torch.rand(B, T, HV, device="cuda")
        a = -F.normalize(torch.randn(B, T, HV, K, device="cuda"), dim=-1)
        b = -a * beta[..., None]
        calls = {
            "simple_gla": lambda: lina.chunk_simple_gla(q, k, v, g3),
            "retention": lambda: lina.chunk_retention(q, k, v),
            "gla": lambda: lina.chunk_gla(q, k, v, g4),
            "delta_rule": lambda: lina.chunk_delta_rule(q, k, v, beta),
            "gdn": lambda: lina.chunk_gated_delta_rule(q, k, v, g3, beta),
            "kda": lambda: lina.chunk_kda(q, k, v, g4, beta),
            "dplr": lambda: lina.chunk_dplr_delta_rule(q, k, v, a, b, g4),
        }
        for name, call in calls.items():
            with self.subTest(name):
                torch._dynamo.reset()

                def f():
                    o, ht = call()
                    return o * 2, ht
                eager = f()
                o, ht = torch.compile(f, fullgraph=True)()
                self.assertIsNone(ht)
                self.assertLess(rel(o, eager[0]), 1e-5, name)

    def test_a_decode_step_through_a_pool(self):
        slots = torch.tensor([3, 1], dtype=torch.int32, device="cuda")
        q = F.normalize(torch.randn(B, 1, H, K, device="cuda"), dim=-1)
        k = F.normalize(torch.randn(B, 1, H, K, device="cuda"), dim=-1)
        v = torch.randn(B, 1, HV, V, device="cuda")
        g = F.logsigmoid(torch.randn(B, 1, HV, device="cuda"))
        beta = torch.rand(B, 1, HV, device="cuda")
        pool = torch.randn(4, HV, K, V, device="cuda") * 0.1

        def step(pool):
            o, pool = lina.fused_recurrent_gated_delta_rule(
                q, k, v, g, beta=beta, initial_state=pool,
                ssm_state_indices=slots)
            return o + 1, pool

        eager_pool, compiled_pool = pool.clone(), pool.clone()
        with torch.no_grad():
            eager = step(eager_pool)
            compiled = torch.compile(step, fullgraph=True)(compiled_pool)
        self.assertLess(rel(compiled[0], eager[0]), 1e-5)
        self.assertIs(compiled[1], compiled_pool)
        self.assertTrue(torch.equal(compiled_pool, eager_pool))
        self.assertFalse(torch.equal(compiled_pool, pool))  # it was updated


if __name__ == "__main__":
    unittest.main()
