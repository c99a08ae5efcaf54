"""The eager-call extension's module (csrc/eager_decode.cpp) with torch on
the host, its launch replaced by a recording stand-in:

    python3 -m unittest discover -s test/python -p test_eager_extension_host.py

What a replay reads of a call (the key: every tensor's shape, strides,
dtype, device, requires_grad and exact type, every other argument's value,
the keywords' order, grad mode), what it launches (each pointer from its
argument, a fresh allocation or NULL, the counts, no stream on the host),
what it returns, its fallbacks (no entry, a refused launch) and what it
refuses to keep. Builds the module (a C++ compiler and ninja); skipped
without torch or liblina.so. On a GPU, test_eager_extension_gpu.py runs it
with CUDA tensors and the real launch.
"""
from __future__ import annotations

import ctypes
import sys
import unittest

from gpu_support import HAVE_LIB, torch
from lina import _capi, eager_extension

LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                          ctypes.POINTER(_capi.DecodeArgs))
HANDLE = 0x1234


class Kernel:
    """Stands in for a DecodeKernel (the module keeps it alive)."""


@unittest.skipUnless(torch is not None and HAVE_LIB,
                     "needs torch and liblina.so")
class HostReplayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        eager_extension.forget()
        cls.module = eager_extension.load(quiet=True)

    def setUp(self):
        self.assertIsNotNone(self.module, eager_extension.failure())
        self.launches, self.status = [], 0

        def launch(handle, args):
            self.launches.append(
                (handle, {f: getattr(args.contents, f)
                          for f, _ in _capi.DecodeArgs._fields_}))
            return self.status

        self.launch = LAUNCH(launch)  # kept alive while the module calls it
        self.module.set_launcher(
            ctypes.cast(self.launch, ctypes.c_void_p).value)
        self.module.set_host_tensors_for_tests(True)
        self.module.clear()
        self.kernel = Kernel()

    def tearDown(self):
        self.module.clear()
        self.module.set_host_tensors_for_tests(False)
        real = _capi.library().lina_decode_forward
        self.module.set_launcher(ctypes.cast(real, ctypes.c_void_p).value)

    def call(self, seed=0, **changes):
        g = torch.Generator().manual_seed(seed)
        q = torch.randn(3, 1, 4, 32, generator=g, dtype=torch.bfloat16)
        k = torch.randn(3, 1, 4, 32, generator=g, dtype=torch.bfloat16)
        beta = torch.rand(3, 1, 4, generator=g)
        args = [q, k]
        kwargs = {"beta": beta, "out": None, "flag": True, "n": 3,
                  "x": 1.5, "name": "pool"}
        for key, value in changes.items():
            if key in ("q", "k"):
                args[0 if key == "q" else 1] = value
            else:
                kwargs[key] = value
        return tuple(args), kwargs

    def remember(self, args, kwargs, **launch):
        description = dict(
            kernel=self.kernel, handle=HANDLE, device=-1,
            pointers=[("q", 0), ("k", 1), ("beta", 2), ("o", "allocated"),
                      ("state", None)],
            counts=[("batch", 3), ("seq_len", 1), ("state_v_first", 1)],
            allocated=[("o", (3, 1, 4, 16), torch.bfloat16)],
            returns=("o", "beta", None))
        description.update(launch)
        return self.module.remember(7, args, kwargs,
                                    tuple(description.values()))

    def test_a_replay_launches_its_own_tensors_with_the_remembered_counts(self):
        self.assertTrue(self.remember(*self.call(0)))
        args, kwargs = self.call(1)
        o, beta, nothing = self.module.replay(7, args, kwargs)
        self.assertEqual(len(self.launches), 1)
        handle, launched = self.launches[0]
        self.assertEqual(handle, HANDLE)
        self.assertEqual(launched["q"], args[0].data_ptr())
        self.assertEqual(launched["k"], args[1].data_ptr())
        self.assertEqual(launched["beta"], kwargs["beta"].data_ptr())
        self.assertEqual(launched["o"], o.data_ptr())
        for null in ("state", "g", "a", "b", "cu_seqlens", "stream"):
            self.assertIsNone(launched[null], null)
        self.assertEqual((launched["batch"], launched["seq_len"],
                          launched["state_v_first"]), (3, 1, 1))
        self.assertEqual((launched["num_slots"], launched["cu_seqlens_int64"]),
                         (0, 0))
        self.assertEqual((o.shape, o.dtype), ((3, 1, 4, 16), torch.bfloat16))
        self.assertIs(beta, kwargs["beta"])
        self.assertIsNone(nothing)
        self.assertEqual(self.module.stats(), (1, 1))

    def test_each_replay_allocates_its_output(self):
        self.remember(*self.call(0))
        args, kwargs = self.call(1)
        o1 = self.module.replay(7, args, kwargs)[0]
        o2 = self.module.replay(7, args, kwargs)[0]
        self.assertIsNot(o1, o2)
        self.assertNotEqual(o1.data_ptr(), o2.data_ptr())

    def test_anything_the_key_reads_that_differs_is_not_replayed(self):
        self.remember(*self.call(0))
        bf16 = torch.bfloat16
        wide = torch.zeros(3, 1, 4, 64, dtype=bf16)[..., :32]
        changes = {
            "another shape": dict(q=torch.zeros(3, 1, 4, 64, dtype=bf16)),
            "another dtype": dict(q=torch.zeros(3, 1, 4, 32)),
            "other strides": dict(q=wide),
            "requires grad": dict(beta=torch.rand(3, 1, 4, requires_grad=True)),
            "a subclass": dict(beta=torch.nn.Parameter(torch.rand(3, 1, 4),
                                                       requires_grad=False)),
            "a flag": dict(flag=False),
            "an int": dict(n=4),
            "an int for a float": dict(x=1),
            "a string": dict(name="pools"),
            "a tensor for None": dict(out=torch.zeros(3, 1, 4, 16, dtype=bf16)),
            "a list": dict(n=[3]),
        }
        for what, change in changes.items():
            with self.subTest(what):
                self.assertIsNone(self.module.replay(7, *self.call(1, **change)))
        args, kwargs = self.call(1)
        self.assertIsNone(self.module.replay(8, args, kwargs))  # another fn
        reordered = dict(reversed(list(kwargs.items())))
        self.assertIsNone(self.module.replay(7, args, reordered))
        with torch.no_grad():
            self.assertIsNone(self.module.replay(7, args, kwargs))
        self.assertEqual(self.launches, [])
        self.assertIsNotNone(self.module.replay(7, args, kwargs))

    def test_host_tensors_are_never_remembered_outside_tests(self):
        self.module.set_host_tensors_for_tests(False)
        self.assertFalse(self.remember(*self.call(0)))
        self.assertEqual(self.module.stats()[0], 0)

    def test_a_refused_launch_is_not_replayed(self):
        self.remember(*self.call(0))
        self.status = 1  # LINA_INVALID_ARGUMENT: the checked path raises it
        self.assertIsNone(self.module.replay(7, *self.call(1)))
        self.assertEqual(len(self.launches), 1)
        self.assertEqual(self.module.stats(), (1, 0))

    def test_what_cannot_be_kept_is_refused_by_name(self):
        args, kwargs = self.call(0)
        bad = {
            "not a pointer field of lina_decode_args":
                dict(pointers=[("nope", 0)]),
            "not a count field": dict(counts=[("q", 1)]),
            "an argument index out of range": dict(pointers=[("q", 9)]),
            "an allocated pointer without its allocation":
                dict(allocated=[]),
            "a returned field that is not a pointer of the launch":
                dict(returns=("final_state",)),
            "must be a torch.dtype":
                dict(allocated=[("o", (3, 1, 4, 16), "bfloat16")]),
            "device index out of range": dict(device=-2),
        }
        for message, launch in bad.items():
            with self.subTest(message), self.assertRaises(ValueError) as cm:
                self.remember(args, kwargs, **launch)
            self.assertIn(message, str(cm.exception))
        self.assertEqual(self.module.stats()[0], 0)

    def test_entries_keep_their_kernel_until_forgotten(self):
        before = sys.getrefcount(self.kernel)
        self.remember(*self.call(0))
        self.assertEqual(sys.getrefcount(self.kernel), before + 1)
        self.module.clear()
        self.assertEqual(sys.getrefcount(self.kernel), before)

    def test_at_most_256_entries_are_kept(self):
        for n in range(257):
            self.assertTrue(self.remember(*self.call(0, n=n)))
        entries = self.module.stats()[0]
        self.assertLessEqual(entries, 256)
        self.assertIsNotNone(self.module.replay(7, *self.call(1, n=256)))


if __name__ == "__main__":
    unittest.main()
