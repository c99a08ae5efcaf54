"""torch.library.opcheck of every lina:: op, on the CPU, with the launches
replaced by deterministic stand-ins (no GPU, no liblina):

    python3 -m unittest discover -s test/python -p test_torch_opcheck.py

opcheck runs each op eagerly and against its fake kernel, and checks its
schema (what it mutates, what its outputs alias), its autograd registration
and, through AOTAutograd with dynamic shapes, that the traced op and its
backward give what eager gives. The arguments are those each fla-named
function passes to its op (recorded from a call), so every function's
preset, options and state form is covered.

Needs torch (CPU is enough); skipped without it, saying why.
"""
from __future__ import annotations

import contextlib
import unittest
from unittest import mock

from test_autograd import spec_without_library

import lina  # noqa: E402  (test_args put python/ on sys.path)
from lina import _checks, autograd, decode_ops, ops, torch_ops  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

needs_ops = unittest.skipUnless(
    torch is not None and torch_ops.REGISTERED,
    "needs torch with torch.library.custom_op (2.4 or later; CPU is enough)")

B, T_, H, HV, K, V = 2, 8, 2, 4, 16, 8


def t(*shape, dtype=None, grad=False):
    x = torch.randn(shape, dtype=dtype or torch.bfloat16)
    return x.requires_grad_(grad)


def f32(*shape, grad=False):
    return t(*shape, dtype=torch.float32, grad=grad)


def launch(kernel, inputs, where):
    """ops.launch's stand-in: o = 2 v, the final state 1 + the initial."""
    o = (inputs.v.float() * 2).to(inputs.q.dtype)
    if "final_state = true" not in kernel[1]:
        return o, None
    ht = torch.ones(inputs.num_sequences, HV, K, V)
    if inputs.initial_state is not None:
        ht = ht + inputs.initial_state
    return o, ht


def launch_backward(launched, saved, do, dht):
    return {name: torch.full(shape, 0.5) for name, shape in
            autograd.backward_buffers(saved).items()}


def launch_decode(kernel, inputs, state, where, *, layout,
                  output_final_state=False, out=None):
    """decode.launch_decode's stand-in: writes out=, the pool, an in-place
    state and the intermediate states as the kernel does."""
    o = (inputs.v.float() * 2).to(inputs.q.dtype)
    if out is not None:
        o = out.copy_(o)
    if layout.intermediate is not None:
        layout.intermediate.add_(1)
    if state.pool is not None:
        state.pool.add_(1)
        return o, state.pool
    if state.inplace:
        return o, state.initial.add_(1)
    if not output_final_state:
        return o, None
    ht = torch.ones(layout.batch, HV, *layout.state_dims(K, V)[0])
    return o, ht if state.initial is None else ht + state.initial.float()


@contextlib.contextmanager
def stand_ins():
    zeros = lambda v, HV: torch.zeros(HV)  # noqa: E731
    patches = [
        mock.patch.object(_checks.Checker, "cuda", lambda *a: None),
        mock.patch.object(ops, "build_spec", spec_without_library),
        mock.patch.object(decode_ops, "build_spec", spec_without_library),
        mock.patch.object(ops, "get_kernel", lambda text, *a: ("k", text)),
        mock.patch.object(decode_ops, "get_decode_kernel",
                          lambda text, *a: ("k", text)),
        # Real CPU tensors take the ops as a traced call would.
        mock.patch.object(torch_ops, "EAGER_THROUGH_OPS", True),
        mock.patch.object(ops, "launch", launch),
        mock.patch.object(decode_ops, "launch_decode", launch_decode),
        mock.patch.object(autograd, "launch_backward", launch_backward),
        mock.patch.object(ops, "_device_index", lambda q: 0),
        mock.patch.object(decode_ops, "_device_index", lambda q: 0),
        mock.patch.object(ops, "_fixed_decay", zeros),
        mock.patch.object(decode_ops, "_fixed_decay", zeros),
        mock.patch.object(ops, "_zeros_like_heads", zeros),
        mock.patch.object(decode_ops, "_zeros_like_heads", zeros),
    ]
    with contextlib.ExitStack() as stack:
        for p in patches:
            stack.enter_context(p)
        yield


def recorded_args(call, kind):
    """(op name, arguments) that ``call`` passes to its op."""
    seen = []

    def record(where, *args):
        seen.append((where[len("lina."):],
                     getattr(torch_ops, kind + "_args")(*args)))
        return None, None
    with mock.patch.object(torch_ops, kind, record), \
            mock.patch.object(torch_ops, "EAGER_THROUGH_OPS", True):
        call()
    (name, args), = seen
    return name, args


def chunk_calls():
    def qkv(b=B, grad=True):
        return (t(b, T_, H, K, grad=grad), t(b, T_, H, K, grad=grad),
                t(b, T_, HV, V, grad=grad))
    g3, g4 = f32(B, T_, HV, grad=True), f32(B, T_, HV, K, grad=True)
    beta, h0 = f32(B, T_, HV, grad=True), f32(B, HV, K, V, grad=True)
    cu = torch.tensor([0, 3, 3, T_], dtype=torch.int32)
    fs = dict(output_final_state=True)
    return {
        "simple_gla": lambda: lina.chunk_simple_gla(*qkv(), g3, **fs),
        "simple_gla g_gamma": lambda: lina.chunk_simple_gla(
            *qkv(), g_gamma=f32(HV, grad=True)),
        "linear_attn": lambda: lina.chunk_simple_gla(*qkv(), scale=0.3),
        "retention": lambda: lina.chunk_retention(*qkv(), **fs),
        "gla + state": lambda: lina.chunk_gla(*qkv(), g4, initial_state=h0,
                                              **fs),
        "delta_rule": lambda: lina.chunk_delta_rule(
            *qkv(), beta, use_qk_l2norm_in_kernel=True),
        "gdn": lambda: lina.chunk_gated_delta_rule(
            *qkv(), g3, beta, initial_state=h0, **fs),
        "gdn gate in kernel": lambda: lina.chunk_gated_delta_rule(
            *qkv(), g3, beta, use_gate_in_kernel=True,
            A_log=f32(HV, grad=True), dt_bias=f32(HV, grad=True)),
        "kda lower bound": lambda: lina.chunk_kda(
            *qkv(), g4, beta, use_gate_in_kernel=True, lower_bound=-5.0,
            dt_bias=f32(HV * K, grad=True), **fs),
        "dplr": lambda: lina.chunk_dplr_delta_rule(
            *qkv(), t(B, T_, HV, K, grad=True), t(B, T_, HV, K, grad=True),
            g4, chunk_size=16),
        "varlen": lambda: lina.chunk_gated_delta_rule(
            *qkv(1), f32(1, T_, HV, grad=True), f32(1, T_, HV, grad=True),
            cu_seqlens=cu, **fs),
        "no grad": lambda: lina.chunk_kda(*qkv(grad=False), g4.detach(),
                                          beta.detach()),
    }


def decode_calls():
    q, k, v = t(B, 2, H, K), t(B, 2, H, K), t(B, 2, HV, V)
    g3, g4, beta = f32(B, 2, HV), f32(B, 2, HV, K), f32(B, 2, HV)
    pool = f32(6, HV, K, V)
    packed = [x.reshape(1, 2 * B, *x.shape[2:]) for x in (q, k, v)]
    slots = torch.tensor([4, 1], dtype=torch.int32)
    per_token = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32)
    accepted = torch.tensor([1, 2], dtype=torch.int32)
    return {
        "gdn pool": lambda: lina.fused_recurrent_gated_delta_rule(
            q, k, v, g3, beta=beta, initial_state=pool,
            ssm_state_indices=slots),
        "kda speculative": lambda: lina.fused_recurrent_kda(
            q, k, v, g4, beta, initial_state=pool,
            ssm_state_indices=per_token, num_accepted_tokens=accepted),
        "delta_rule out=": lambda: lina.fused_recurrent_delta_rule(
            q, k, v, beta, out=t(B, 2, HV, V), output_final_state=True),
        "simple_gla in place": lambda: lina.fused_recurrent_simple_gla(
            q, k, v, g3, initial_state=f32(B, HV, K, V),
            inplace_final_state=True),
        "gla": lambda: lina.fused_recurrent_gla(q, k, v, g4),
        "retention": lambda: lina.fused_recurrent_retention(
            q, k, v, initial_state=f32(B, HV, K, V), output_final_state=True),
        "dplr": lambda: lina.fused_recurrent_dplr_delta_rule(
            q, k, v, t(B, 2, HV, K), t(B, 2, HV, K), g4, warps=4),
        "gdn packed, [V, K] pool": lambda: lina.fused_recurrent_gdn(
            *packed, g3.reshape(1, 2 * B, HV), beta=beta.reshape(1, 2 * B, HV),
            initial_state=f32(6, HV, V, K), ssm_state_indices=slots,
            cu_seqlens=torch.tensor([0, 1, 2 * B], dtype=torch.int32),
            state_v_first=True),
        "kda intermediate states": lambda: lina.fused_recurrent_kda(
            q, k, v, g4, beta, initial_state=pool, ssm_state_indices=slots,
            intermediate_states_buffer=f32(6, 2, HV, K, V),
            disable_state_update=True),
        "gdn packed, new [V, K] state": lambda: lina.fused_recurrent_gdn(
            *packed, g3.reshape(1, 2 * B, HV), beta=beta.reshape(1, 2 * B, HV),
            initial_state=f32(2, HV, V, K), output_final_state=True,
            cu_seqlens=torch.tensor([0, 3, 2 * B], dtype=torch.int64),
            state_v_first=True),
    }


@needs_ops
class OpcheckTest(unittest.TestCase):
    def opcheck(self, calls, kind):
        for case, call in calls.items():
            with self.subTest(case):
                name, args = recorded_args(call, kind)
                with stand_ins():
                    result = torch.library.opcheck(
                        getattr(torch.ops.lina, name).default, args)
                self.assertEqual(set(result.values()), {"SUCCESS"}, result)

    def test_chunk_ops(self):
        self.opcheck(chunk_calls(), "chunk")

    def test_decode_ops(self):
        self.opcheck(decode_calls(), "decode")

    def test_the_stand_ins_reach_the_op_eagerly(self):
        # What opcheck compares is the kernel's work, not the fake's.
        name, args = recorded_args(chunk_calls()["gdn"], "chunk")
        with stand_ins():
            o, ht = getattr(torch.ops.lina, name)(*args)
        self.assertTrue(torch.equal(o, (args[2].float() * 2).bfloat16()))
        self.assertTrue(torch.equal(ht, args[9] + 1))


@needs_ops
class ErrorsThroughTheOpsTest(unittest.TestCase):
    """The op's kernel raises the function's own exceptions: the type, the
    message and a LinaError's status come through the dispatcher."""

    def test_a_check(self):
        q, v = t(B, T_, H, K), t(B, T_, HV, V)
        with stand_ins(), self.assertRaisesRegex(
                ValueError, r"^lina.chunk_gla: 'k' must have shape "
                r"\[B, T, H, K\] = \[2, 8, 2, 16\], got \[2, 8, 2, 15\]$"):
            lina.chunk_gla(q, t(B, T_, H, K - 1), v, f32(B, T_, HV, K))

    def test_a_liblina_status(self):
        def refuse(*args):
            raise lina.LinaError("lina_kernel_create: NO_DRIVER: no CUDA "
                                 "driver found", lina.Status.NO_DRIVER)
        q, v = t(B, T_, H, K), t(B, T_, HV, V)
        with stand_ins(), mock.patch.object(ops, "get_kernel", refuse), \
                self.assertRaises(lina.LinaError) as cm:
            lina.chunk_simple_gla(q, t(B, T_, H, K), v)
        self.assertEqual(cm.exception.status, lina.Status.NO_DRIVER)


if __name__ == "__main__":
    unittest.main()
