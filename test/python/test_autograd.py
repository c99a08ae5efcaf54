"""Tests of the fla-named functions' gradients that need no GPU:

    python3 -m unittest discover -s test/python -p test_autograd.py

- which of the caller's tensors each call hands to autograd, under which of
  lina's input names (fla's gk is g, g_gamma is g; lina's own constants do
  not require grad), with the stand-in tensors of test_args.py;
- which fp32 gradient buffers a backward call passes to liblina (one per
  input the forward passed) and what comes back to each tensor;
- lina_backward_* through ctypes: a bad knob, NULLs, no driver (needs
  liblina.so);
- with torch (CPU): a requires-grad call on CPU tensors is refused like the
  forward, and the autograd Function end to end with the two launches
  replaced, so that gradients, dtypes and the unused outputs are seen to
  reach the right tensors.
"""
from __future__ import annotations

import contextlib
import ctypes
import unittest
from unittest import mock

from test_args import GDN, T, needs_library, qkv

import lina  # noqa: E402  (test_args put python/ on sys.path)
from lina import _capi, _checks, autograd, ops, spec  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

needs_torch = unittest.skipUnless(torch is not None, "needs torch (CPU is "
                                  "enough)")

F32 = dict(dtype="float32")
GRAD = dict(requires_grad=True)


def spec_without_library(preset, dims, options):
    """ops.build_spec without liblina: the preset's deciding fields, the
    dims and the options (the real one starts from lina_preset_spec)."""
    K, V, H, HV, dtype = dims
    fields = dict(ops.PRESET_FIELDS[preset], key_dim=K, value_dim=V, heads=H,
                  value_heads=HV, dtype=dtype)
    fields.update((f, value) for f, value in options if value is not None)
    return spec.spec_text(preset, fields)


class Recorder:
    """Stands in for autograd.run: records what a call hands to autograd."""

    def __init__(self):
        self.calls = []

    def run(self, where, forward, tensors):
        self.calls.append({"where": where, "forward": forward,
                           "tensors": tensors})
        return "o", "final_state"


class WhatEachCallDifferentiatesTest(unittest.TestCase):
    """For each fla-named function: the tensors autograd sees, by lina's
    input name, and which of them can get a gradient."""

    def setUp(self):
        self.rec = Recorder()
        constant = lambda *a, **k: T(4, **F32)  # noqa: E731
        self.patches = [
            mock.patch.object(ops.autograd, "run", self.rec.run),
            # No torch here: a stand-in tensor requiring grad is enough.
            mock.patch.object(ops.autograd, "wants_grad", lambda ts: any(
                getattr(t, "requires_grad", False) for t in ts)),
            mock.patch.object(ops, "_zeros_like_heads", constant),
            mock.patch.object(ops, "retention_log_decay", constant),
            mock.patch.object(ops, "build_spec", spec_without_library),
        ]
        for p in self.patches:
            p.start()

    def tearDown(self):
        for p in self.patches:
            p.stop()

    def differentiable(self):
        """name -> tensor, of the tensors that require grad."""
        return {name: t for name, t in self.rec.calls[-1]["tensors"].items()
                if getattr(t, "requires_grad", False)}

    def test_each_function(self):
        q, k, v = qkv(**GRAD)
        g3, g4 = T(2, 16, 4, **F32, **GRAD), T(2, 16, 4, 32, **F32, **GRAD)
        beta, g_gamma = T(2, 16, 4, **F32, **GRAD), T(4, **F32, **GRAD)
        a, b = T(2, 16, 4, 32, **GRAD), T(2, 16, 4, 32, **GRAD)
        A_log, dt_bias = T(4, **F32, **GRAD), T(4 * 32, **F32, **GRAD)
        dt_bias_h = T(4, **F32, **GRAD)
        h0 = T(2, 4, 32, 16, **F32, **GRAD)
        qkv_ = {"q": q, "k": k, "v": v}
        cases = [
            ("simple_gla", lambda: lina.chunk_simple_gla(q, k, v, g3),
             dict(qkv_, g=g3)),
            ("simple_gla g_gamma",
             lambda: lina.chunk_simple_gla(q, k, v, g_gamma=g_gamma),
             dict(qkv_, g=g_gamma)),
            ("linear_attn", lambda: lina.chunk_simple_gla(q, k, v), qkv_),
            # RetNet's decay is lina's constant: no gradient to return.
            ("retention", lambda: lina.chunk_retention(q, k, v), qkv_),
            ("gla + state", lambda: lina.chunk_gla(
                q, k, v, g4, initial_state=h0, output_final_state=True),
             dict(qkv_, g=g4, initial_state=h0)),
            ("delta_rule", lambda: lina.chunk_delta_rule(q, k, v, beta),
             dict(qkv_, beta=beta)),
            ("gdn", lambda: lina.chunk_gated_delta_rule(q, k, v, g3, beta),
             dict(qkv_, g=g3, beta=beta)),
            ("gdn gate in kernel", lambda: lina.chunk_gated_delta_rule(
                q, k, v, g3, beta, use_gate_in_kernel=True, A_log=A_log,
                dt_bias=dt_bias_h),
             dict(qkv_, g=g3, beta=beta, A_log=A_log, dt_bias=dt_bias_h)),
            ("kda softplus gate", lambda: lina.chunk_kda(
                q, k, v, g4, beta, use_gate_in_kernel=True, A_log=A_log,
                dt_bias=dt_bias),
             dict(qkv_, g=g4, beta=beta, A_log=A_log, dt_bias=dt_bias)),
            # Without A_log the lower-bound gate reads lina's zeros.
            ("kda lower bound", lambda: lina.chunk_kda(
                q, k, v, g4, beta, use_gate_in_kernel=True, lower_bound=-5.0,
                dt_bias=dt_bias),
             dict(qkv_, g=g4, beta=beta, dt_bias=dt_bias)),
            # fla's gk is lina's g.
            ("dplr", lambda: lina.chunk_dplr_delta_rule(q, k, v, a, b, g4),
             dict(qkv_, g=g4, a=a, b=b)),
        ]
        for name, call, expected in cases:
            with self.subTest(name):
                self.assertEqual(call(), ("o", "final_state"))
                got = self.differentiable()
                self.assertEqual(set(got), set(expected))
                for n, t in expected.items():
                    self.assertIs(got[n], t, n)  # the caller's own tensor

    def test_constants_are_passed_but_not_differentiated(self):
        q, k, v = qkv(**GRAD)
        lina.chunk_retention(q, k, v)
        tensors = self.rec.calls[-1]["tensors"]
        self.assertIsNotNone(tensors["g"])
        self.assertFalse(tensors["g"].requires_grad)
        lina.chunk_kda(q, k, v, T(2, 16, 4, 32, **F32), T(2, 16, 4, **F32),
                       use_gate_in_kernel=True, lower_bound=-5.0)
        self.assertFalse(self.rec.calls[-1]["tensors"]["A_log"].requires_grad)

    def test_no_tensor_requiring_grad_takes_the_plain_path(self):
        q, k, v = qkv()
        with mock.patch.object(ops, "get_kernel", lambda *a: "kernel"), \
                mock.patch.object(ops, "launch", lambda *a: ("o", None)):
            self.assertEqual(lina.chunk_gla(q, k, v, T(2, 16, 4, 32, **F32)),
                             ("o", None))
        self.assertEqual(self.rec.calls, [])

    def test_the_recorded_forward_checks_and_launches(self):
        # int32 cu_seqlens is converted by the forward, and is no input of
        # autograd's (it has no gradient).
        q, k, v = qkv(B=1, T_=10, **GRAD)
        cu = T(3, dtype="int32", device="cuda:0", values=[0, 3, 10])
        lina.chunk_gla(q, k, v, T(1, 10, 4, 32, **F32), cu_seqlens=cu)
        call = self.rec.calls[-1]
        self.assertNotIn("cu_seqlens", call["tensors"])
        launched = []
        with mock.patch.object(ops, "get_kernel",
                               lambda text, *a: ("kernel", text)), \
                mock.patch.object(ops, "launch", lambda kernel, inputs, where:
                                  launched.append(inputs) or ("o", None)):
            (o, ht), after = call["forward"](call["tensors"])
        self.assertEqual((o, ht), ("o", None))
        self.assertIs(after.inputs, launched[0])
        self.assertEqual(str(after.inputs.cu_seqlens.dtype), "torch.int64")
        self.assertEqual(spec.parse_spec_text(after.text)[1]["varlen"], True)
        self.assertEqual(after.device, 0)


class BackwardBuffersTest(unittest.TestCase):
    """The gradient buffers handed to lina_backward_run: one per input the
    forward passed, in that input's shape."""

    def buffers(self, preset, dtype="bf16", **tensors):
        fields = dict(ops.PRESET_FIELDS[preset], key_dim=32, value_dim=16,
                      heads=2, value_heads=4, dtype=dtype)
        for name, value in tensors.pop("fields", {}).items():
            fields[name] = value
        q, k, v = qkv()
        inputs = _checks.check_inputs("t", fields, q=q, k=k, v=v, **tensors)
        return autograd.backward_buffers(
            {n: getattr(inputs, n) for n in autograd.SAVED})

    def test_each_preset(self):
        qkv_shapes = {"q": [2, 16, 2, 32], "k": [2, 16, 2, 32],
                      "v": [2, 16, 4, 16]}
        self.assertEqual(self.buffers("linear_attn"), qkv_shapes)
        self.assertEqual(self.buffers("retnet", g=T(4, **F32)),
                         dict(qkv_shapes, g=[4]))
        self.assertEqual(
            self.buffers("gdn", g=T(2, 16, 4, **F32), beta=T(2, 16, 4, **F32),
                         initial_state=T(2, 4, 32, 16, **F32),
                         fields={"initial_state": True}),
            dict(qkv_shapes, g=[2, 16, 4], beta=[2, 16, 4],
                 initial_state=[2, 4, 32, 16]))
        self.assertEqual(
            self.buffers("rwkv7", g=T(2, 16, 4, 32, **F32), a=T(2, 16, 4, 32),
                         b=T(2, 16, 4, 32)),
            dict(qkv_shapes, g=[2, 16, 4, 32], a=[2, 16, 4, 32],
                 b=[2, 16, 4, 32]))
        # dt_bias keeps the caller's layout ([HV * K] here); A_log has a
        # buffer whether or not it is the caller's.
        self.assertEqual(
            self.buffers("kda", g=T(2, 16, 4, 32, **F32),
                         beta=T(2, 16, 4, **F32), A_log=T(4, **F32),
                         dt_bias=T(4 * 32, **F32),
                         fields={"gate": "lower_bound",
                                 "gate_lower_bound": -5.0}),
            dict(qkv_shapes, g=[2, 16, 4, 32], beta=[2, 16, 4], A_log=[4],
                 dt_bias=[128]))

    def test_every_buffer_has_a_c_field(self):
        fields = {f for f, _ in _capi.BackwardArgs._fields_}
        self.assertLessEqual(set(autograd.GRADIENT_FIELDS.values()), fields)


class ReturnedGradientsTest(unittest.TestCase):
    def test_only_wanted_gradients_come_back_cast(self):
        grads = {"q": "dq", "k": "dk", "g": "dg", "A_log": "dA"}
        got = autograd.returned_gradients(
            ("q", "k", "g", "A_log", "initial_state"),
            (True, False, True, False, False),
            ("bf16", "bf16", "f32", "f32", None), grads,
            lambda t, dtype: (t, dtype))
        self.assertEqual(got, (("dq", "bf16"), None, ("dg", "f32"), None,
                               None))

    def test_a_wanted_gradient_that_is_missing_is_an_error(self):
        with self.assertRaisesRegex(AssertionError, "no gradient for 'beta'"):
            autograd.returned_gradients(("beta",), (True,), ("f32",), {},
                                        lambda t, d: t)


def gdn_spec_text() -> str:
    return spec.spec_text("gdn", GDN)


@needs_library
class BackwardCApiTest(unittest.TestCase):
    """lina_backward_* through ctypes, as autograd calls them."""

    def test_a_forward_knob_is_refused_by_name(self):
        s = _capi.Schedule(0, 0, 0, int(_capi.Strategy.SPLIT))
        with self.assertRaises(lina.LinaError) as cm:
            _capi.backward_create(gdn_spec_text(), s, 0)
        self.assertEqual(cm.exception.status, _capi.Status.INVALID_ARGUMENT)
        self.assertIn("'strategy' is a forward knob", str(cm.exception))

    def test_a_bad_spec_is_an_argument_error(self):
        with self.assertRaises(lina.LinaError) as cm:
            _capi.backward_create("lina.recurrence @x <decay = none>", None, 0)
        self.assertEqual(cm.exception.status, _capi.Status.INVALID_ARGUMENT)

    def test_no_driver_is_a_status(self):
        try:
            handle = _capi.backward_create(gdn_spec_text(), None, 0)
        except lina.LinaError as e:
            self.assertEqual(e.status, _capi.Status.NO_DRIVER, str(e))
            self.assertIn("lina_backward_create: NO_DRIVER", str(e))
            return
        _capi.backward_destroy(handle)
        self.skipTest("a GPU is present: the no-driver path cannot be shown")

    def test_for_shape_refuses_what_create_refuses_and_bad_shapes(self):
        s = _capi.Schedule(0, 0, 0, int(_capi.Strategy.SPLIT))
        with self.assertRaises(lina.LinaError) as cm:
            _capi.backward_create_for_shape(gdn_spec_text(), s, 2, 64, 0)
        self.assertIn("'strategy' is a forward knob", str(cm.exception))
        with self.assertRaises(lina.LinaError) as cm:
            _capi.backward_create_for_shape(gdn_spec_text(), None, -1, 64, 0)
        self.assertEqual(cm.exception.status, _capi.Status.INVALID_ARGUMENT)
        self.assertIn("batch and seq_len must not be negative",
                      str(cm.exception))
        try:
            handle = _capi.backward_create_for_shape(gdn_spec_text(), None, 2,
                                                     64, 0)
        except lina.LinaError as e:
            self.assertEqual(e.status, _capi.Status.NO_DRIVER, str(e))
            return
        _capi.backward_destroy(handle)

    def test_nulls(self):
        lib = _capi.library()
        self.assertEqual(lib.lina_backward_run(None, None),
                         _capi.Status.INVALID_ARGUMENT)
        self.assertIn("lina_backward_run", _capi.last_error())
        out = ctypes.c_void_p()
        self.assertEqual(lib.lina_backward_create(None, None, 0,
                                                  ctypes.byref(out)),
                         _capi.Status.INVALID_ARGUMENT)
        lib.lina_backward_destroy(None)


@needs_library
class BackwardKernelPerBucketTest(unittest.TestCase):
    """Which backward kernel a call gets: one per shape bucket when no knob
    is set (lina_backward_create_for_shape picks the tuned schedule), one
    per schedule otherwise; a backward tune drops the buckets' kernels."""

    def setUp(self):
        self.made = []

        def make(text, schedule, device, shape=None):
            self.made.append((schedule, shape))
            return len(self.made)

        patch = mock.patch.object(autograd, "_cache",
                                  autograd.KernelCache(make))
        patch.start()
        self.addCleanup(patch.stop)

    def test_buckets(self):
        get = autograd.get_backward_kernel
        first = get("spec", 0, shape=(4, 2000, 16))
        # 4 x 1500 is in the same bucket (bh=33..64, t=1025..4096).
        self.assertEqual(get("spec", 0, shape=(4, 1500, 16)), first)
        other = get("spec", 0, shape=(4, 300, 16))
        self.assertNotEqual(other, first)
        self.assertEqual(self.made, [((0, 0, 0), (4, 2000)),
                                     ((0, 0, 0), (4, 300))])
        # A schedule of the caller's own: no shape asked for.
        get("spec", 0, schedule=(32, 0, 0), shape=(4, 2000, 16))
        self.assertEqual(self.made[-1], ((32, 0, 0), None))
        autograd.forget_buckets()
        self.assertNotEqual(get("spec", 0, shape=(4, 2000, 16)), first)
        self.assertEqual(len(self.made), 4)


@needs_torch
class TorchOnCpuTest(unittest.TestCase):
    def gdn_inputs(self, dtype=None, B=2, T_=16, H=2, HV=4, K=32, V=16):
        dtype = dtype or torch.bfloat16
        q = torch.randn(B, T_, H, K, dtype=dtype, requires_grad=True)
        k = torch.randn(B, T_, H, K, dtype=dtype, requires_grad=True)
        v = torch.randn(B, T_, HV, V, dtype=dtype, requires_grad=True)
        g = torch.randn(B, T_, HV, dtype=dtype).sigmoid().log() \
            .requires_grad_()
        beta = torch.rand(B, T_, HV, requires_grad=True)
        h0 = torch.randn(B, HV, K, V, requires_grad=True)
        return q, k, v, g, beta, h0

    def test_cpu_tensors_are_refused_as_in_the_forward(self):
        q, k, v, g, beta, _ = self.gdn_inputs()
        messages = []
        for grad in (False, True):
            with torch.set_grad_enabled(grad):
                with self.assertRaises(ValueError) as cm:
                    lina.chunk_gated_delta_rule(q, k, v, g, beta)
            messages.append(str(cm.exception))
        self.assertEqual(messages[0], messages[1])
        self.assertIn("'q' must be on a CUDA device, got cpu", messages[1])

    def test_the_function_end_to_end(self):
        # The device check and both launches are replaced: o = sum of v over
        # its features (so do reaches v), each gradient a constant per input.
        q, k, v, g, beta, h0 = self.gdn_inputs()
        seen = {}

        def launch(kernel, inputs, where):
            o = inputs.v.detach().clone()
            return o, inputs.initial_state.detach().clone()

        def backward(launched, saved, do, dht):
            seen.update(do=do, dht=dht, saved=saved)
            return {name: torch.full(shape, float(i + 1))
                    for i, (name, shape) in enumerate(
                        autograd.backward_buffers(saved).items())}

        with mock.patch.object(_checks.Checker, "cuda", lambda *a: None), \
                mock.patch.object(ops, "build_spec", spec_without_library), \
                mock.patch.object(ops, "get_kernel", lambda *a: "kernel"), \
                mock.patch.object(ops, "launch", launch), \
                mock.patch.object(ops, "_device_index", lambda t: 0), \
                mock.patch.object(autograd, "launch_backward", backward):
            o, ht = lina.chunk_gated_delta_rule(
                q, k, v, g, beta, initial_state=h0, output_final_state=True)
            self.assertIsNotNone(o.grad_fn)
            (o.float().sum() * 2).backward()
        # Only o was used: dht is None, not zeros made for nothing.
        self.assertIsNone(seen["dht"])
        self.assertEqual(seen["do"].dtype, torch.bfloat16)
        self.assertTrue(torch.all(seen["do"] == 2))
        # The buffers come back in order q, k, v, g, beta, initial_state,
        # each cast to its tensor's dtype.
        for i, t in enumerate((q, k, v, g, beta, h0)):
            self.assertEqual(t.grad.dtype, t.dtype)
            self.assertEqual(t.grad.shape, t.shape)
            self.assertTrue(torch.all(t.grad == i + 1), i)
        # The saved inputs are the ones launched: g made fp32.
        self.assertEqual(seen["saved"]["g"].dtype, torch.float32)

    def test_only_the_final_state_used(self):
        q, k, v, g, beta, h0 = self.gdn_inputs()
        seen = {}

        def backward(launched, saved, do, dht):
            seen.update(do=do, dht=dht)
            return {name: torch.zeros(shape) for name, shape in
                    autograd.backward_buffers(saved).items()}

        with mock.patch.object(_checks.Checker, "cuda", lambda *a: None), \
                mock.patch.object(ops, "build_spec", spec_without_library), \
                mock.patch.object(ops, "get_kernel", lambda *a: "kernel"), \
                mock.patch.object(ops, "launch", lambda kernel, inputs, where:
                                  (inputs.v.detach().clone(),
                                   inputs.initial_state.detach().clone())), \
                mock.patch.object(ops, "_device_index", lambda t: 0), \
                mock.patch.object(autograd, "launch_backward", backward):
            _, ht = lina.chunk_gated_delta_rule(
                q.detach(), k.detach(), v.detach(), g.detach(), beta.detach(),
                initial_state=h0, output_final_state=True)
            ht.sum().backward()
        self.assertIsNone(seen["do"])
        self.assertTrue(torch.all(seen["dht"] == 1))
        self.assertIsNotNone(h0.grad)


@needs_torch
class LaunchBackwardOnCpuTest(unittest.TestCase):
    """The lina_backward_args a backward call fills in, with the CUDA calls
    and liblina replaced: every pointer where the C API expects it."""

    def run_backward(self, saved, do, dht):
        recorded = []

        class Kernel:
            _handle = 7
            shapes = []

            @classmethod
            def workspace_bytes(cls, batch, seq_len, num_sequences):
                cls.shapes.append((batch, seq_len, num_sequences))
                return 4096

        class Stream:
            cuda_stream = 0x1234

        def run(h, args, workspace, nbytes):
            recorded.append((h, args, workspace, nbytes))

        def get_backward_kernel(text, device, shape=None):
            Kernel.shapes.append(("bucket of", shape))
            return Kernel

        self.kernel = Kernel
        with mock.patch.object(autograd, "get_backward_kernel",
                               get_backward_kernel), \
                mock.patch.object(_capi, "backward_run_with_workspace", run), \
                mock.patch.object(torch.cuda, "device",
                                  lambda d: contextlib.nullcontext()), \
                mock.patch.object(torch.cuda, "current_stream",
                                  lambda d: Stream):
            inputs = _checks.Inputs(q=saved["q"], k=saved["k"], v=saved["v"],
                                    batch=2, seq_len=16, num_sequences=2)
            grads = autograd.launch_backward(
                autograd.Launched(inputs, "spec", 0), saved, do, dht)
        return grads, recorded

    def saved(self, T_=16):
        names = dict.fromkeys(autograd.SAVED)
        names.update(q=torch.randn(2, T_, 2, 32, dtype=torch.bfloat16),
                     k=torch.randn(2, T_, 2, 32, dtype=torch.bfloat16),
                     v=torch.randn(2, T_, 4, 16, dtype=torch.bfloat16),
                     g=torch.randn(2, T_, 4), beta=torch.rand(2, T_, 4),
                     initial_state=torch.randn(2, 4, 32, 16))
        return names

    def test_pointers(self):
        saved = self.saved()
        do = torch.randn(2, 16, 16, 4).transpose(2, 3)  # fp32, not contiguous
        grads, recorded = self.run_backward(saved, do, None)
        (handle, args, workspace, nbytes), = recorded
        self.assertEqual(handle, 7)
        # The workspace: the size the kernel gave for the call's shape, in
        # memory of its own (torch's, not one of the gradients).
        # The kernel is the one of the call's bucket: (B, T, HV), as the
        # forward's kernel took it.
        self.assertEqual(self.kernel.shapes,
                         [("bucket of", (2, 16, 4)), (2, 16, 2)])
        self.assertEqual(nbytes, 4096)
        self.assertIsNotNone(workspace)
        self.assertNotIn(workspace, [t.data_ptr() for t in grads.values()])
        self.assertEqual(set(grads), {"q", "k", "v", "g", "beta",
                                      "initial_state"})
        for name, field in autograd.GRADIENT_FIELDS.items():
            want = grads[name].data_ptr() if name in grads else None
            self.assertEqual(getattr(args, field), want, field)
            self.assertEqual(getattr(args.forward, {
                "A_log": "gate_a_log", "dt_bias": "gate_dt_bias"}.get(
                    name, name)),
                saved[name].data_ptr() if saved[name] is not None else None)
        self.assertEqual(grads["g"].dtype, torch.float32)
        self.assertEqual(list(grads["initial_state"].shape), [2, 4, 32, 16])
        # o and final_state are not the backward's; dO was made bf16 and
        # contiguous (a copy), d_final_state is NULL (zero).
        self.assertIsNone(args.forward.o)
        self.assertIsNone(args.forward.final_state)
        self.assertIsNone(args.d_final_state)
        self.assertNotEqual(args.d_o, do.data_ptr())
        self.assertEqual((args.forward.batch, args.forward.seq_len,
                          args.forward.num_sequences, args.forward.stream),
                         (2, 16, 2, 0x1234))

    def test_no_tokens_passes_the_state_gradient_through(self):
        saved = self.saved(T_=0)
        dht = torch.randn(2, 4, 32, 16)
        grads, recorded = self.run_backward(saved, None, dht)
        self.assertEqual(recorded, [])
        self.assertTrue(torch.equal(grads["initial_state"], dht))
        self.assertEqual(float(grads["g"].abs().sum()), 0.0)


if __name__ == "__main__":
    unittest.main()
