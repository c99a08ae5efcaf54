"""The fla-named functions as torch.library custom ops, without a GPU:

    python3 -m unittest discover -s test/python -p test_torch_ops.py

- every chunk_* and fused_recurrent_* function has its op
  (torch.ops.lina.<name>) with the schema torch_ops.py writes, the decode
  ops declaring the state and out= mutated;
- the fake kernels: the shapes, dtypes and devices of every function's
  outputs under FakeTensorMode with CUDA fake tensors, for each preset a
  function can ask for, with and without final states, varlen, grouped
  value heads, and the decode state forms;
- what each call hands to its op (traced with make_fx on meta tensors,
  where the fake kernels run);
- autograd through the ops on meta tensors: every input's gradient has its
  shape and dtype; calls without grad record nothing;
- torch.compile(fullgraph=True) of a small model that calls lina, forward
  and backward, with the eager and aot_eager backends on meta tensors.

Needs torch (CPU is enough, 2.4 or later for torch.library.custom_op);
without it every test is skipped, saying why. Running the real kernels
under torch.compile needs a GPU: test_compile_gpu.py.
"""
from __future__ import annotations

import unittest
from unittest import mock

from test_args import T as Stand_in

import lina  # noqa: E402  (test_args put python/ on sys.path)
from lina import torch_ops  # noqa: E402

try:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
except ImportError:
    torch = None

needs_ops = unittest.skipUnless(
    torch is not None and torch_ops.REGISTERED,
    "needs torch with torch.library.custom_op (2.4 or later; CPU is enough)")

B, T_, H, HV, K, V = 2, 16, 2, 4, 32, 16
BF16, F32 = "bfloat16", "float32"


def make(device, requires_grad=False):
    """A function making tensors on ``device``: make(*shape, dtype=...)."""
    def tensor(*shape, dtype=BF16, rg=requires_grad):
        t = torch.randn(shape, dtype=getattr(torch, dtype), device=device) \
            if device != "meta" else \
            torch.empty(shape, dtype=getattr(torch, dtype), device=device)
        return t.requires_grad_(rg and t.is_floating_point())
    return tensor


def chunk_calls(t):
    """(name, call, N) for each fla-named chunk call and preset: N is the
    final state's number of sequences."""
    q, k, v = t(B, T_, H, K), t(B, T_, H, K), t(B, T_, HV, V)
    g3, g4 = t(B, T_, HV, dtype=F32), t(B, T_, HV, K, dtype=F32)
    beta, gamma = t(B, T_, HV, dtype=F32), t(HV, dtype=F32)
    a, b = t(B, T_, HV, K), t(B, T_, HV, K)
    A_log, h0 = t(HV, dtype=F32), t(B, HV, K, V, dtype=F32)
    q1, k1, v1 = t(1, T_, H, K), t(1, T_, H, K), t(1, T_, HV, V)
    cu = torch.tensor([0, 5, 5, T_], dtype=torch.int32, device=q.device)
    fs = dict(output_final_state=True)
    return [
        ("simple_gla", lambda: lina.chunk_simple_gla(q, k, v, g3, **fs), B),
        ("simple_gla g_gamma", lambda: lina.chunk_simple_gla(
            q, k, v, g_gamma=gamma, **fs), B),
        ("linear_attn", lambda: lina.chunk_simple_gla(q, k, v, **fs), B),
        ("retention", lambda: lina.chunk_retention(q, k, v, **fs), B),
        ("gla + state", lambda: lina.chunk_gla(
            q, k, v, g4, initial_state=h0, **fs), B),
        ("delta_rule", lambda: lina.chunk_delta_rule(
            q, k, v, beta, use_qk_l2norm_in_kernel=True, **fs), B),
        ("gdn", lambda: lina.chunk_gated_delta_rule(q, k, v, g3, beta, **fs),
         B),
        ("gdn gate in kernel", lambda: lina.chunk_gdn(
            q, k, v, g3, beta, use_gate_in_kernel=True, A_log=A_log,
            dt_bias=t(HV, dtype=F32), **fs), B),
        ("kda", lambda: lina.chunk_kda(q, k, v, g4, beta,
                                       use_beta_sigmoid_in_kernel=True, **fs),
         B),
        ("kda lower bound", lambda: lina.chunk_kda(
            q, k, v, g4, beta, use_gate_in_kernel=True, lower_bound=-5.0,
            dt_bias=t(HV * K, dtype=F32), **fs), B),
        ("dplr", lambda: lina.chunk_dplr_delta_rule(q, k, v, a, b, g4, **fs),
         B),
        ("varlen", lambda: lina.chunk_gated_delta_rule(
            q1, k1, v1, t(1, T_, HV, dtype=F32), t(1, T_, HV, dtype=F32),
            cu_seqlens=cu, **fs), 3),
    ]


def decode_calls(t, T=2):
    q, k, v = t(B, T, H, K), t(B, T, H, K), t(B, T, HV, V)
    g3, g4 = t(B, T, HV, dtype=F32), t(B, T, HV, K, dtype=F32)
    beta = t(B, T, HV, dtype=F32)
    fs = dict(output_final_state=True)
    return [
        ("gdn", lambda: lina.fused_recurrent_gated_delta_rule(
            q, k, v, g3, beta=beta, **fs)),
        ("gdn via gk (kda)", lambda: lina.fused_recurrent_gdn(
            q, k, v, gk=g4, beta=beta, **fs)),
        ("kda", lambda: lina.fused_recurrent_kda(q, k, v, g4, beta, **fs)),
        ("delta_rule", lambda: lina.fused_recurrent_delta_rule(
            q, k, v, beta, **fs)),
        ("simple_gla", lambda: lina.fused_recurrent_simple_gla(
            q, k, v, g3, **fs)),
        ("gla", lambda: lina.fused_recurrent_gla(q, k, v, g4, **fs)),
        ("retention", lambda: lina.fused_recurrent_retention(q, k, v, **fs)),
        ("dplr", lambda: lina.fused_recurrent_dplr_delta_rule(
            q, k, v, t(B, T, HV, K), t(B, T, HV, K), g4, **fs)),
    ]


@needs_ops
class RegistrationTest(unittest.TestCase):
    def test_every_function_has_its_op(self):
        names = [n for n in lina.__all__
                 if n.startswith(("chunk_", "fused_recurrent_"))]
        aliases = {"chunk_gdn": "chunk_gated_delta_rule",
                   "fused_recurrent_gdn": "fused_recurrent_gated_delta_rule"}
        self.assertEqual(len(names), 16)
        for name in names:
            with self.subTest(name):
                op = getattr(torch.ops.lina, aliases.get(name, name))
                self.assertIn(aliases.get(name, name),
                              torch_ops.CHUNK_OPS + torch_ops.DECODE_OPS)
                self.assertEqual(op.overloads(), ["default"])

    def test_schemas(self):
        for names, schema in ((torch_ops.CHUNK_OPS, torch_ops.CHUNK_SCHEMA),
                              (torch_ops.DECODE_OPS, torch_ops.DECODE_SCHEMA),
                              (("chunk_backward",),
                               torch_ops.BACKWARD_SCHEMA)):
            for name in names:
                with self.subTest(name):
                    op = getattr(torch.ops.lina, name).default
                    self.assertEqual(str(op._schema), f"lina::{name}{schema}")

    def test_what_each_op_mutates(self):
        for name in torch_ops.CHUNK_OPS + torch_ops.DECODE_OPS:
            schema = getattr(torch.ops.lina, name).default._schema
            mutated = {a.name for a in schema.arguments
                       if a.alias_info is not None and a.alias_info.is_write}
            expected = (set(torch_ops.DECODE_MUTATES)
                        if name in torch_ops.DECODE_OPS else set())
            self.assertEqual(mutated, expected, name)

    def test_stand_in_tensors_do_not_reach_the_ops(self):
        # test_args' duck-typed tensors are checked without torch's ops.
        self.assertFalse(torch_ops.dispatchable(Stand_in(2, 3)))
        self.assertFalse(torch_ops.dispatchable(torch.zeros(1), [1, 2]))
        # Real tensors launch directly in eager mode; traced ones (meta or
        # fake tensors, torch.compile) and every call with
        # EAGER_THROUGH_OPS take the op.
        self.assertFalse(torch_ops.dispatchable(torch.zeros(1), None))
        self.assertTrue(torch_ops.dispatchable(torch.zeros(1, device="meta"),
                                               None))
        with mock.patch.object(torch_ops, "EAGER_THROUGH_OPS", True):
            self.assertTrue(torch_ops.dispatchable(torch.zeros(1), None))


@needs_ops
class FakeKernelTest(unittest.TestCase):
    """Shapes under FakeTensorMode, with fake CUDA tensors: what
    torch.compile's tracing sees."""

    def test_chunk_outputs(self):
        with FakeTensorMode():
            t = make("cuda")
            for name, call, N in chunk_calls(t):
                with self.subTest(name):
                    o, ht = call()
                    batch = 1 if name == "varlen" else B
                    self.assertEqual(list(o.shape), [batch, T_, HV, V])
                    self.assertEqual((o.dtype, o.device.type),
                                     (torch.bfloat16, "cuda"))
                    self.assertEqual(list(ht.shape), [N, HV, K, V])
                    self.assertEqual((ht.dtype, ht.device.type),
                                     (torch.float32, "cuda"))

    def test_no_final_state_is_none(self):
        with FakeTensorMode():
            t = make("cuda")
            q, k, v = t(B, T_, H, K), t(B, T_, H, K), t(B, T_, HV, V)
            o, ht = lina.chunk_gla(q, k, v, t(B, T_, HV, K, dtype=F32))
            self.assertIsNone(ht)
            self.assertEqual(list(o.shape), [B, T_, HV, V])

    def test_float32_inputs(self):
        with FakeTensorMode():
            t = make("cuda")
            o, _ = lina.chunk_simple_gla(t(B, T_, H, K, dtype=F32),
                                         t(B, T_, H, K, dtype=F32),
                                         t(B, T_, HV, V, dtype=F32))
            self.assertEqual(o.dtype, torch.float32)

    def test_decode_outputs(self):
        with FakeTensorMode():
            t = make("cuda")
            for name, call in decode_calls(t):
                with self.subTest(name):
                    o, ht = call()
                    self.assertEqual(list(o.shape), [B, 2, HV, V])
                    self.assertEqual(o.dtype, torch.bfloat16)
                    self.assertEqual(list(ht.shape), [B, HV, K, V])
                    self.assertEqual(ht.dtype, torch.float32)

    def test_decode_state_forms(self):
        with FakeTensorMode():
            t = make("cuda")
            q, k, v = t(B, 1, H, K), t(B, 1, H, K), t(B, 1, HV, V)
            g, beta = t(B, 1, HV, dtype=F32), t(B, 1, HV, dtype=F32)
            pool = t(8, HV, K, V, dtype=F32)
            slots = torch.zeros(B, dtype=torch.int32, device="cuda")
            out = t(B, 1, HV, V)
            # The pool form returns the pool itself; out= returns out.
            o, ht = lina.fused_recurrent_gated_delta_rule(
                q, k, v, g, beta=beta, initial_state=pool,
                ssm_state_indices=slots, out=out)
            self.assertIs(o, out)
            self.assertIs(ht, pool)
            # fla's form, written in place.
            h0 = t(B, HV, K, V, dtype=F32)
            _, ht = lina.fused_recurrent_kda(
                q, k, v, t(B, 1, HV, K, dtype=F32), beta, initial_state=h0,
                inplace_final_state=True)
            self.assertIs(ht, h0)
            # fla's form without a final state.
            o, ht = lina.fused_recurrent_delta_rule(q, k, v, beta,
                                                    initial_state=h0)
            self.assertIsNone(ht)
            self.assertEqual(list(o.shape), [B, 1, HV, V])

    def test_a_bad_shape_is_named_while_tracing(self):
        with FakeTensorMode():
            t = make("cuda")
            with self.assertRaisesRegex(
                    ValueError, r"lina.chunk_kda: 'q' must have 4 dimensions"):
                lina.chunk_kda(t(B, T_, K), t(B, T_, H, K), t(B, T_, HV, V),
                               t(B, T_, HV, K, dtype=F32),
                               t(B, T_, HV, dtype=F32))


def lina_nodes(fn, *args):
    """The lina ops of ``fn`` traced by make_fx (meta tensors: the fake
    kernels run): [(op name, {argument: value})]."""
    gm = make_fx(fn)(*args)
    nodes = []
    for node in gm.graph.nodes:
        target = getattr(node.target, "_schema", None)
        if target is not None and target.name.startswith("lina::"):
            names = [a.name for a in target.arguments]
            nodes.append((target.name[len("lina::"):],
                          dict(zip(names, node.args))))
    return nodes


@needs_ops
class WhatEachCallPassesTest(unittest.TestCase):
    def test_presets_and_options(self):
        t = make("meta")
        q, k, v = t(B, T_, H, K), t(B, T_, H, K), t(B, T_, HV, V)
        g4, beta = t(B, T_, HV, K, dtype=F32), t(B, T_, HV, dtype=F32)
        gamma = t(HV, dtype=F32)
        cases = [
            (lambda: lina.chunk_simple_gla(q, k, v, g_gamma=gamma),
             "chunk_simple_gla",
             dict(preset="retnet", g=gamma, output_final_state=False,
                  beta_kind=None, gate=None)),
            # lina's decay is made by the kernel: no g reaches the op.
            (lambda: lina.chunk_retention(q, k, v, scale=0.5),
             "chunk_retention", dict(preset="retnet", g=None, scale=0.5)),
            (lambda: lina.chunk_kda(
                q, k, v, g4, beta, use_gate_in_kernel=True, lower_bound=-5.0,
                use_beta_sigmoid_in_kernel=True, allow_neg_eigval=True,
                chunk_size=32, strategy="split"),
             "chunk_kda",
             dict(preset="kda", A_log=None, fill_A_log=True,
                  gate="lower_bound", gate_lower_bound=-5.0, beta_kind="two_sigmoid",
                  qk_l2norm=False, chunk_size=32, strategy="split",
                  prefetch=None, mma=None)),
            (lambda: lina.fused_recurrent_gla(
                q[:, :1], k[:, :1], v[:, :1], warp_columns=8),
             "fused_recurrent_gla",
             dict(preset="linear_attn", g=None, warp_columns=8, warps=0,
                  inplace_final_state=None)),
        ]
        for call, op, expected in cases:
            with self.subTest(op):
                (name, args), = lina_nodes(lambda: call())
                self.assertEqual(name, op)
                for arg, value in expected.items():
                    if isinstance(value, torch.Tensor):
                        # Traced: a graph node where a tensor was passed.
                        self.assertIsInstance(args[arg], torch.fx.Node, arg)
                    else:
                        self.assertEqual(args[arg], value, arg)


@needs_ops
class AutogradThroughTheOpsTest(unittest.TestCase):
    """On meta tensors the ops' fake kernels run, forward and backward: the
    registered autograd is seen to give each input a gradient of its shape
    and dtype."""

    def test_every_input_gets_its_gradient(self):
        t = make("meta", requires_grad=True)
        for name, call, _ in chunk_calls(t):
            with self.subTest(name):
                o, ht = call()
                self.assertIsNotNone(o.grad_fn)
                (o.float().sum() + ht.sum()).backward()
        t = make("meta", requires_grad=True)
        q, k, v = t(B, T_, H, K), t(B, T_, H, K), t(B, T_, HV, V)
        g, beta = t(B, T_, HV, K, dtype=F32), t(B, T_, HV, dtype=F32)
        dt_bias = t(HV * K, dtype=F32)  # keeps its [HV * K] shape
        o, _ = lina.chunk_kda(q, k, v, g, beta, use_gate_in_kernel=True,
                              lower_bound=-5.0, dt_bias=dt_bias)
        o.float().sum().backward()
        for x in (q, k, v, g, beta, dt_bias):
            self.assertEqual((x.grad.shape, x.grad.dtype), (x.shape, x.dtype))

    def test_no_grad_records_nothing(self):
        t = make("meta", requires_grad=True)
        q, k, v = t(B, T_, H, K), t(B, T_, H, K), t(B, T_, HV, V)
        with torch.no_grad():
            o, _ = lina.chunk_simple_gla(q, k, v)
        self.assertIsNone(o.grad_fn)
        t = make("meta")
        o, _ = lina.chunk_simple_gla(t(B, T_, H, K), t(B, T_, H, K),
                                     t(B, T_, HV, V))
        self.assertFalse(o.requires_grad)

    def test_decode_refuses_grad_before_its_op(self):
        t = make("meta", requires_grad=True)
        with self.assertRaisesRegex(lina.LinaError,
                                    "decoding has no backward pass"):
            lina.fused_recurrent_simple_gla(t(B, 1, H, K), t(B, 1, H, K),
                                            t(B, 1, HV, V))


class Block(torch.nn.Module if torch is not None else object):
    """A Gated DeltaNet layer's skeleton: projections, lina, a projection."""

    def __init__(self, d=64):
        super().__init__()
        self.qkv = torch.nn.Linear(d, 2 * H * K + HV * V, dtype=torch.bfloat16)
        self.gb = torch.nn.Linear(d, 2 * HV)
        self.out = torch.nn.Linear(HV * V, d, dtype=torch.bfloat16)

    def forward(self, x, h0):
        b, t = x.shape[:2]
        q, k, v = self.qkv(x).split([H * K, H * K, HV * V], dim=-1)
        g, beta = self.gb(x.float()).chunk(2, dim=-1)
        o, ht = lina.chunk_gated_delta_rule(
            q.reshape(b, t, H, K), k.reshape(b, t, H, K),
            v.reshape(b, t, HV, V), torch.nn.functional.logsigmoid(g),
            beta.sigmoid(), initial_state=h0, output_final_state=True)
        return self.out(o.reshape(b, t, HV * V)), ht


@needs_ops
class CompileTest(unittest.TestCase):
    """torch.compile(fullgraph=True) traces lina's calls as ops: a graph
    break would fail the compile. Meta tensors run the compiled graph on
    the fake kernels."""

    def setUp(self):
        torch._dynamo.reset()

    def compile(self, fn, backend):
        graphs = []

        def record(gm, example_inputs):
            graphs.append(gm)
            return torch._dynamo.backends.registry.lookup_backend(backend)(
                gm, example_inputs)
        return torch.compile(fn, backend=record, fullgraph=True), graphs

    def test_a_model_forward_and_backward(self):
        for backend in ("eager", "aot_eager"):
            with self.subTest(backend):
                torch._dynamo.reset()
                block = Block().to("meta")
                x = torch.empty(B, T_, 64, dtype=torch.bfloat16,
                                device="meta")
                h0 = torch.empty(B, HV, K, V, device="meta",
                                 requires_grad=True)
                compiled, graphs = self.compile(block, backend)
                y, ht = compiled(x, h0)
                self.assertEqual(len(graphs), 1)
                ops = {str(n.target) for n in graphs[0].graph.nodes
                       if n.op == "call_function"}
                self.assertIn("lina.chunk_gated_delta_rule", ops)
                self.assertEqual(list(y.shape), [B, T_, 64])
                self.assertEqual(list(ht.shape), [B, HV, K, V])
                (y.float().sum() + ht.sum()).backward()
                self.assertEqual(block.qkv.weight.grad.shape,
                                 block.qkv.weight.shape)
                self.assertEqual(h0.grad.shape, h0.shape)

    def test_decode_with_a_state_pool(self):
        def step(q, k, v, g, beta, pool, slots):
            o, pool = lina.fused_recurrent_gated_delta_rule(
                q, k, v, g, beta=beta, initial_state=pool,
                ssm_state_indices=slots)
            return o * 2, pool

        t = make("meta")
        pool = t(8, HV, K, V, dtype=F32)
        slots = torch.empty(B, dtype=torch.int32, device="meta")
        compiled, graphs = self.compile(step, "aot_eager")
        o, out_pool = compiled(t(B, 1, H, K), t(B, 1, H, K), t(B, 1, HV, V),
                               t(B, 1, HV, dtype=F32), t(B, 1, HV, dtype=F32),
                               pool, slots)
        self.assertEqual(len(graphs), 1)
        self.assertEqual(list(o.shape), [B, 1, HV, V])
        self.assertIs(out_pool, pool)  # as in eager: the pool, updated

    def test_dynamic_shapes(self):
        # Batch and length change without a recompile per shape.
        def f(q, k, v, g):
            return lina.chunk_simple_gla(q, k, v, g,
                                         output_final_state=True)

        compiled, graphs = self.compile(f, "aot_eager")
        t = make("meta")
        for b, n in ((2, 16), (3, 40), (5, 72)):
            o, ht = compiled(t(b, n, H, K), t(b, n, H, K), t(b, n, HV, V),
                             t(b, n, HV, dtype=F32))
            self.assertEqual(list(o.shape), [b, n, HV, V])
            self.assertEqual(list(ht.shape), [b, HV, K, V])
        self.assertLessEqual(len(graphs), 2)  # static, then dynamic


if __name__ == "__main__":
    unittest.main()
