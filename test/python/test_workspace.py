"""The chunk calls' and the backward's workspaces from torch's caching
allocator, without a GPU:

    python3 -m unittest discover -s test/python -p test_workspace.py

- ``workspace.WorkspaceSizes`` asks liblina once per call shape and keeps a
  bounded number of shapes;
- ``workspace.allocate`` makes a uint8 tensor of the size (none for 0);
- ``kernel.launch`` asks the kernel for the call's size and hands
  ``lina_kernel_forward_with_workspace`` memory of that size, its own for
  each call; a fused kernel (size 0) gets NULL; a call on another stream
  allocates it on that stream;
- the ctypes declarations of the four entry points, through liblina.so:
  a NULL kernel is an argument error naming the function.

Needs torch (CPU is enough); the CUDA calls and liblina are replaced.
test_cuda_graph_gpu.py runs the kernels: capture and replay in CUDA graphs,
two streams at once.
"""
from __future__ import annotations

import contextlib
import ctypes
import unittest
from unittest import mock

from test_args import needs_library  # (also puts python/ on sys.path)

from lina import _capi, kernel, workspace  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

needs_torch = unittest.skipUnless(torch is not None,
                                  "needs torch (CPU is enough)")


class WorkspaceSizesTest(unittest.TestCase):
    def test_each_shape_is_asked_once(self):
        asked = []

        def query(handle, batch, seq_len, num_sequences):
            asked.append((handle, batch, seq_len, num_sequences))
            return batch * seq_len * 10

        sizes = workspace.WorkspaceSizes(query, 42)
        self.assertEqual(sizes(2, 64, 2), 1280)
        self.assertEqual(sizes(2, 64, 2), 1280)
        self.assertEqual(sizes(1, 100, 3), 1000)
        self.assertEqual(asked, [(42, 2, 64, 2), (42, 1, 100, 3)])

    def test_the_oldest_shape_is_dropped_past_the_bound(self):
        asked = []

        def query(handle, batch, seq_len, num_sequences):
            asked.append(seq_len)
            return seq_len

        with mock.patch.object(workspace, "_MAX_SHAPES", 2):
            sizes = workspace.WorkspaceSizes(query, 0)
            for seq_len in (1, 2, 3, 2, 1):
                sizes(1, seq_len, 1)
        # 3 pushed 1 out; 2 was still kept; 1 was asked again.
        self.assertEqual(asked, [1, 2, 3, 1])


@needs_torch
class AllocateTest(unittest.TestCase):
    def test_bytes_from_torch(self):
        t = workspace.allocate(torch, 1000, torch.device("cpu"))
        self.assertEqual(t.dtype, torch.uint8)
        self.assertEqual(t.numel(), 1000)
        self.assertEqual(t.device.type, "cpu")

    def test_nothing_for_zero(self):
        self.assertIsNone(workspace.allocate(torch, 0, torch.device("cpu")))


class _Stream:
    cuda_stream = 0x1234


@needs_torch
class LaunchTest(unittest.TestCase):
    """What kernel.launch hands liblina, on CPU tensors."""

    def launch(self, nbytes, calls=1, stream=None):
        recorded, shapes = [], []

        class Kernel:
            device = 0
            _handle = 9
            fields = {"key_dim": 32, "value_dim": 16, "value_heads": 4,
                      "final_state": True}

            @staticmethod
            def workspace_bytes(batch, seq_len, num_sequences):
                shapes.append((batch, seq_len, num_sequences))
                return nbytes

        def forward(handle, args, ptr, size):
            recorded.append((handle, args, ptr, size))

        q = torch.randn(2, 16, 2, 32, dtype=torch.bfloat16)
        inputs = kernel.Inputs(q=q, k=q.clone(),
                               v=torch.randn(2, 16, 4, 16,
                                             dtype=torch.bfloat16),
                               batch=2, seq_len=16, num_sequences=2)
        with mock.patch.object(_capi, "kernel_forward_with_workspace",
                               forward), \
                mock.patch.object(torch.cuda, "device",
                                  lambda d: contextlib.nullcontext()), \
                mock.patch.object(torch.cuda, "current_stream",
                                  lambda d: _Stream), \
                torch.no_grad():
            outputs = [kernel.launch(Kernel, inputs, "test", stream=stream)
                       for _ in range(calls)]
        return recorded, shapes, outputs

    def test_the_call_gets_the_size_of_its_shape(self):
        recorded, shapes, [(o, ht)] = self.launch(3072)
        (handle, args, ptr, size), = recorded
        self.assertEqual(shapes, [(2, 16, 2)])
        self.assertEqual((handle, size), (9, 3072))
        self.assertIsNotNone(ptr)
        self.assertNotIn(ptr, (args.q, args.k, args.v, args.o,
                               args.final_state))
        self.assertEqual(args.stream, 0x1234)

    def test_a_fused_kernel_gets_none(self):
        recorded, _, _ = self.launch(0)
        (_, _, ptr, size), = recorded
        self.assertEqual((ptr, size), (None, 0))

    def test_another_stream_allocates_there(self):
        # A call on a stream other than the current one takes its workspace
        # from that stream's memory, which needs no record_stream; the
        # outputs, made on the current stream, are recorded there.
        events = []

        @contextlib.contextmanager
        def on_stream(s):
            events.append(("enter", s))
            yield
            events.append(("exit", s))

        def allocate(torch_, nbytes, device):
            events.append(("allocate", nbytes))
            return workspace.allocate(torch_, nbytes, device)

        recorded_on = []
        with mock.patch.object(torch.cuda, "ExternalStream",
                               lambda handle: ("stream", handle)), \
                mock.patch.object(torch.cuda, "stream", on_stream), \
                mock.patch.object(torch.Tensor, "record_stream",
                                  lambda t, s: recorded_on.append(
                                      (t.dtype, s))), \
                mock.patch.object(kernel, "allocate", allocate):
            recorded, _, [(o, ht)] = self.launch(768, stream=0x5678)
        s = ("stream", 0x5678)
        self.assertEqual(events, [("enter", s), ("allocate", 768),
                                  ("exit", s)])
        (_, args, ptr, size), = recorded
        self.assertEqual((args.stream, size), (0x5678, 768))
        self.assertIsNotNone(ptr)
        self.assertNotIn(torch.uint8, [dtype for dtype, _ in recorded_on])
        self.assertIn((o.dtype, s), recorded_on)

    def test_each_call_gets_its_own(self):
        # Each call allocates anew, so calls in flight never share one
        # (kept alive here, the two cannot be the same memory).
        allocated = []
        real = workspace.allocate

        def allocate(torch_, nbytes, device):
            t = real(torch_, nbytes, device)
            allocated.append(t)
            return t

        with mock.patch.object(kernel, "allocate", allocate):
            recorded, _, _ = self.launch(512, calls=2)
        self.assertEqual([t.numel() for t in allocated], [512, 512])
        self.assertNotEqual(allocated[0].data_ptr(), allocated[1].data_ptr())
        self.assertEqual([r[2] for r in recorded],
                         [t.data_ptr() for t in allocated])


@needs_library
class CApiTest(unittest.TestCase):
    def test_null_kernels_are_argument_errors(self):
        for query in (_capi.kernel_workspace_size,
                      _capi.backward_workspace_size):
            with self.assertRaises(_capi.LinaError) as cm:
                query(None, 1, 16, 0)
            self.assertEqual(cm.exception.status,
                             _capi.Status.INVALID_ARGUMENT)
            self.assertIn("kernel and bytes must not be NULL",
                          str(cm.exception))
        for run, args in (
                (_capi.kernel_forward_with_workspace, _capi.ForwardArgs()),
                (_capi.backward_run_with_workspace, _capi.BackwardArgs())):
            with self.assertRaises(_capi.LinaError) as cm:
                run(None, args, None, 0)
            self.assertIn("_with_workspace: INVALID_ARGUMENT: "
                          "lina_", str(cm.exception))
            self.assertIn("kernel and args must not be NULL",
                          str(cm.exception))
        size = ctypes.c_size_t(5)
        self.assertEqual(_capi.library().lina_kernel_workspace_size(
            None, 1, 16, 0, ctypes.byref(size)), _capi.Status.INVALID_ARGUMENT)
        self.assertEqual(size.value, 5)


if __name__ == "__main__":
    unittest.main()
