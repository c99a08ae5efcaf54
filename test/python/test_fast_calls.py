"""Tests of lina.fast_calls, the decode functions' remembered eager calls,
without a GPU or torch (stand-in tensors; the launch records its arguments):

    python3 -m unittest discover -s test/python -p test_fast_calls.py

A call with an earlier call's key must skip the Python checks, launch with
its own tensors and fresh outputs, and return its own tensors; anything
else (another shape, a converted input, a traced call) must be checked as
the first call was.
"""
from __future__ import annotations

import contextlib
import gc
import itertools
import sys
import unittest
import weakref
from unittest import mock

from test_args import FakeDType, FakeTensor, needs_library

import lina  # noqa: E402  (test_args put python/ on sys.path)
from lina import (_capi, decode, decode_ops, eager_extension,  # noqa: E402
                  fast_calls, spec, torch_ops)

_pointers = itertools.count(0x10000, 0x1000)
_dtypes: dict = {}


class Tensor(FakeTensor):
    """A stand-in with what a key reads: strides, a device index, one dtype
    object per name, and an address of its own."""

    def __init__(self, *shape, dtype="bfloat16", **kw):
        super().__init__(*shape, dtype=dtype, **kw)
        self.dtype = _dtypes.setdefault(dtype, FakeDType(dtype))
        self.address = next(_pointers)

    def stride(self):
        strides, n = [], 1
        for d in reversed(self.shape):
            strides.append(n)
            n *= d
        strides.reverse()
        return tuple(strides) if self._contiguous else tuple(reversed(strides))

    def get_device(self):
        return -1 if self.device.type == "cpu" else (self.device.index or 0)

    def data_ptr(self):
        return self.address


class Kernel:
    def __init__(self, text):
        self.fields = spec.parse_spec_text(text)[1]
        self._handle = 7


@needs_library
class RememberedDecodeCallsTest(unittest.TestCase):
    def setUp(self):
        self.launches, self.checks, self.made = [], [], []
        real_check_state = decode_ops.check_state

        def counted_check_state(*args, **kwargs):
            self.checks.append(args[0])
            return real_check_state(*args, **kwargs)

        def empty(shape, dtype, device):
            t = Tensor(*shape, dtype=getattr(dtype, "name", dtype),
                       device=str(device))
            self.made.append(t)
            return t

        def launch(handle, args):
            self.launches.append({f: getattr(args, f)
                                  for f, _ in _capi.DecodeArgs._fields_})

        fast_calls.clear()
        self.patches = [
            mock.patch.object(fast_calls, "TENSOR", Tensor),
            mock.patch.object(fast_calls, "_grad_enabled", lambda: True),
            mock.patch.object(fast_calls, "_traced", lambda: False),
            mock.patch.object(decode_ops, "check_state", counted_check_state),
            mock.patch.object(decode_ops, "get_decode_kernel",
                              lambda text, schedule, device: Kernel(text)),
            mock.patch.object(decode_ops, "_device_index", lambda q: 0),
            mock.patch.object(decode, "refuse_grad", lambda where, ts: None),
            mock.patch.object(decode, "empty", empty),
            mock.patch.object(decode, "current_stream", lambda device: 0),
            mock.patch.object(decode, "device_guard",
                              lambda device: contextlib.nullcontext()),
            mock.patch.object(_capi, "decode_forward", launch),
            # The C++ module needs torch; NativeEntriesTest stands one in.
            mock.patch.object(eager_extension, "load", self.load_native),
            mock.patch.object(fast_calls, "_native", None),
            mock.patch.object(fast_calls, "_native_refused", False),
        ]
        for p in self.patches:
            p.start()

    def tearDown(self):
        for p in self.patches:
            p.stop()
        fast_calls.clear()

    def load_native(self, quiet=False):
        return None

    def step(self, B=3, HV=4, K=32, V=16, pool_slots=5, out=True, **kw):
        """A gdn decode step into a state pool: (arguments, result)."""
        q, k = (Tensor(B, 1, 2, K) for _ in range(2))
        v = Tensor(B, 1, HV, V)
        g, beta = (Tensor(B, 1, HV, dtype="float32") for _ in range(2))
        pool = Tensor(pool_slots, HV, K, V, dtype="float32")
        slots = Tensor(B, dtype="int32")
        o = Tensor(B, 1, HV, V) if out else None
        args = dict(q=q, k=k, v=v, g=g, beta=beta, pool=pool, slots=slots,
                    out=o)
        args.update(kw)
        result = lina.fused_recurrent_gated_delta_rule(
            args["q"], args["k"], args["v"], args["g"], beta=args["beta"],
            initial_state=args["pool"], ssm_state_indices=args["slots"],
            out=args["out"])
        return args, result

    def test_a_repeated_call_skips_the_checks_and_launches_its_own_tensors(self):
        self.step()
        args, (o, pool) = self.step()
        self.assertEqual(len(self.checks), 1)  # the second call: no checks
        self.assertEqual(len(self.launches), 2)
        first, second = self.launches
        self.assertEqual(second["q"], args["q"].data_ptr())
        self.assertEqual(second["beta"], args["beta"].data_ptr())
        self.assertEqual(second["state"], args["pool"].data_ptr())
        self.assertEqual(second["state_indices"], args["slots"].data_ptr())
        self.assertEqual(second["o"], args["out"].data_ptr())
        self.assertIsNone(second["a"])
        self.assertIs(o, args["out"])
        self.assertIs(pool, args["pool"])
        # Everything but the addresses is the checked call's.
        for field in ("batch", "seq_len", "num_slots", "indices_per_token",
                      "state_v_first", "disable_state_update"):
            self.assertEqual(second[field], first[field], field)
        self.assertNotEqual(second["q"], first["q"])

    def test_an_allocated_output_is_new_each_call(self):
        _, (o1, _) = self.step(out=False)
        _, (o2, _) = self.step(out=False)
        self.assertEqual(len(self.checks), 1)
        self.assertIsNot(o1, o2)
        self.assertEqual(self.launches[1]["o"], o2.data_ptr())
        self.assertEqual(o2.shape, (3, 1, 4, 16))

    def test_another_shape_is_checked_again(self):
        self.step()
        self.step(pool_slots=9)
        self.assertEqual(len(self.checks), 2)
        with self.assertRaises(ValueError) as cm:
            self.step(pool=Tensor(5, 4, 16, 32, dtype="float32"))
        self.assertIn("'initial_state' (the state pool) must have shape",
                      str(cm.exception))
        self.assertEqual(len(self.launches), 2)

    def test_a_bad_call_after_a_good_one_of_other_dtypes_is_refused(self):
        self.step()
        with self.assertRaises(ValueError) as cm:
            self.step(slots=Tensor(3, dtype="int64"))
        self.assertIn("'ssm_state_indices' must be torch.int32", str(cm.exception))

    def test_a_converted_input_is_checked_every_call(self):
        # beta not contiguous: the call launches with a copy, so nothing
        # can be replayed.
        for _ in range(2):
            self.step(beta=Tensor(3, 1, 4, dtype="float32", contiguous=False))
        self.assertEqual(len(self.checks), 2)
        self.assertEqual(len(self.launches), 2)

    def test_calls_through_the_ops_or_traced_are_not_remembered(self):
        with mock.patch.object(torch_ops, "EAGER_THROUGH_OPS", True), \
                mock.patch.object(torch_ops, "dispatchable",
                                  lambda *ts: False):
            self.step()
            self.step()
        self.assertEqual(len(self.checks), 2)
        with mock.patch.object(fast_calls, "_traced", lambda: True):
            self.step()
            self.step()
        self.assertEqual(len(self.checks), 4)

    def test_a_tensor_passed_twice_is_not_remembered(self):
        # q passed as k too: a later call's own k must not take q's place.
        q = Tensor(3, 1, 2, 32)
        self.step(q=q, k=q)
        args, _ = self.step()
        self.assertEqual(len(self.checks), 2)
        self.assertEqual(self.launches[1]["k"], args["k"].data_ptr())

    def test_a_remembered_call_keeps_none_of_its_tensors(self):
        args, result = self.step()
        pool = weakref.ref(args["pool"])
        del args, result
        gc.collect()
        self.assertIsNone(pool())
        self.step()
        self.assertEqual(len(self.checks), 1)

    def test_grad_mode_is_part_of_the_key(self):
        self.step()
        with mock.patch.object(fast_calls, "_grad_enabled", lambda: False):
            self.step()
        self.assertEqual(len(self.checks), 2)


class StandInNative:
    """What lina.fast_calls asks of eager_decode.cpp's module: it keeps
    what it is handed and replays with what a test sets."""

    def __init__(self):
        self.remembered, self.replayed, self.cleared = [], [], 0
        self.results = None  # what replay returns (None: "cannot")
        self.refuse = None   # an exception remember raises

    def remember(self, number, args, kwargs, launch):
        if self.refuse is not None:
            raise self.refuse
        self.remembered.append((number, args, kwargs, launch))

    def replay(self, number, args, kwargs):
        self.replayed.append((number, args, kwargs))
        return self.results

    def clear(self):
        self.cleared += 1


class NativeEntriesTest(RememberedDecodeCallsTest):
    """The hand-off to the C++ module (lina.eager_extension): each checked
    call it could replay is handed over, its replay comes first, and a call
    it cannot replay takes the Python path. The module itself runs on the
    GPU (test_eager_extension_gpu.py)."""

    def setUp(self):
        self.native = StandInNative()
        self.loads = 0
        super().setUp()

    def load_native(self, quiet=False):
        self.loads += 1
        return self.native

    def test_a_remembered_call_keeps_none_of_its_tensors(self):
        # The stand-in keeps what it is handed; the module keeps no tensor.
        self.native.remember = lambda *handed: None
        super().test_a_remembered_call_keeps_none_of_its_tensors()

    def test_a_checked_call_is_handed_over_with_where_each_pointer_comes_from(self):
        args, _ = self.step()
        self.assertEqual(len(self.native.remembered), 1)
        number, passed, kwargs, launch = self.native.remembered[0]
        kernel, handle, device, pointers, counts, allocated, returns = launch
        self.assertEqual(passed, (args["q"], args["k"], args["v"], args["g"]))
        self.assertEqual(list(kwargs), ["beta", "initial_state",
                                        "ssm_state_indices", "out"])
        self.assertEqual(handle, kernel._handle)
        self.assertEqual(device, 0)
        pointers = dict(pointers)
        # Indices into args + kwargs' values, as the module reads them.
        values = passed + tuple(kwargs.values())
        for field, name in (("q", "q"), ("beta", "beta"), ("state", "pool"),
                            ("state_indices", "slots"), ("o", "out")):
            self.assertIs(values[pointers[field]], args[name], field)
        self.assertIsNone(pointers["a"])
        self.assertEqual(dict(counts)["batch"], 3)
        self.assertEqual(dict(counts)["num_slots"], 5)
        self.assertEqual(allocated, [])
        self.assertEqual(returns, ("o", "state"))

    def test_an_allocated_output_is_handed_over_with_its_torch_dtype(self):
        fake_torch = type("torch", (), {"float32": "the float32 dtype"})
        with mock.patch.dict(sys.modules, {"torch": fake_torch}):
            q, k = (Tensor(2, 1, 2, 32) for _ in range(2))
            v = Tensor(2, 1, 4, 16)
            g, beta = (Tensor(2, 1, 4, dtype="float32") for _ in range(2))
            lina.fused_recurrent_gated_delta_rule(
                q, k, v, g, beta=beta, output_final_state=True)
        launch = self.native.remembered[0][3]
        allocated = dict((f, (shape, dtype)) for f, shape, dtype in launch[5])
        self.assertEqual(allocated["o"], ((2, 1, 4, 16), q.dtype))
        self.assertEqual(allocated["final_state"],
                         ((2, 4, 32, 16), "the float32 dtype"))
        self.assertEqual(dict(launch[3])["o"], "allocated")
        self.assertEqual(launch[6], ("o", "final_state"))

    def test_the_modules_replay_comes_first(self):
        self.step()
        self.native.results = ("its o", "its pool")
        _, result = self.step()
        self.assertEqual(result, ("its o", "its pool"))
        self.assertEqual(len(self.launches), 1)  # no Python launch
        self.assertEqual(len(self.checks), 1)
        self.assertEqual(len(self.native.replayed), 1)

    def test_a_call_the_module_cannot_replay_takes_the_python_path(self):
        self.step()
        args, (o, _) = self.step()  # the stand-in returns None
        self.assertEqual(len(self.native.replayed), 1)
        self.assertEqual(len(self.checks), 1)  # Python's entry replayed it
        self.assertEqual(self.launches[1]["q"], args["q"].data_ptr())
        self.assertIs(o, args["out"])

    def test_a_call_never_remembered_is_never_handed_over(self):
        for _ in range(2):
            self.step(beta=Tensor(3, 1, 4, dtype="float32", contiguous=False))
        self.assertEqual(self.native.remembered, [])

    def test_clear_forgets_the_modules_entries_too(self):
        self.step()
        fast_calls.clear()
        self.assertEqual(self.native.cleared, 1)

    def test_a_refused_entry_turns_the_module_off_with_a_warning(self):
        self.native.refuse = ValueError("not a pointer field")
        with self.assertWarnsRegex(RuntimeWarning, "not a pointer field"):
            self.step()
        self.native.refuse = None
        self.step(pool_slots=9)
        self.step(pool_slots=9)
        self.assertEqual(self.native.remembered, [])
        self.assertEqual(self.native.replayed, [])
        self.assertEqual(len(self.launches), 3)

    def test_switched_off_the_module_is_never_loaded(self):
        with mock.patch.dict("os.environ", {eager_extension.ENV: "0"}):
            self.step()
            self.step()
        self.assertEqual(self.loads, 0)
        self.assertEqual(len(self.checks), 1)


if __name__ == "__main__":
    unittest.main()
