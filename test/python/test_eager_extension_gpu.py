"""The eager-call extension (lina.eager_extension, csrc/eager_decode.cpp) on a
GPU: a decode call it replays must launch what the Python path launches
with the same tensors (outputs equal bit for bit), on the current stream,
with fresh outputs; a launch the library refuses must end in the checked
path's error; a replay captured in a CUDA graph must equal the eager step.

    python3 -m unittest discover -v -s test/python -p test_eager_extension_gpu.py

Builds the extension (a C++ compiler and ninja) on first run; needs torch
with CUDA and liblina.so, skipped otherwise. The kernels themselves are
checked against the float64 reference by test_decode_gpu.py and the decode
suite.
"""
from __future__ import annotations

import unittest
from unittest import mock

from gpu_support import F, lina, needs_gpu, torch
from lina import eager_extension, fast_calls

B, H, HV, K, V, SLOTS = 3, 4, 4, 128, 128, 7


def step_inputs(seed, form="gdn"):
    """Fresh random inputs of one decode step into a pool of SLOTS slots."""
    g = torch.Generator(device="cuda").manual_seed(seed)

    def randn(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, generator=g, device="cuda", dtype=dtype)

    f32 = torch.float32
    gate_shape = (B, 1, HV) if form == "gdn" else (B, 1, HV, K)
    return dict(
        q=randn(B, 1, H, K), k=randn(B, 1, H, K), v=randn(B, 1, HV, V),
        g=F.logsigmoid(randn(*gate_shape, dtype=f32)).clamp(-5, 0),
        beta=randn(B, 1, HV, dtype=f32).sigmoid(),
        initial_state=0.1 * randn(SLOTS, HV, K, V, dtype=f32),
        ssm_state_indices=torch.randperm(SLOTS, generator=g, device="cuda")[
            :B].to(torch.int32))


def cloned(inputs):
    return {name: t.clone() for name, t in inputs.items()}


def call(inputs, **extra):
    return lina.fused_recurrent_gated_delta_rule(
        **inputs, use_qk_l2norm_in_kernel=True, **extra)


def python_path(fn, *args, **kwargs):
    """fn's result with the module out of the way (fast_calls' own entries)."""
    with mock.patch.object(fast_calls, "_native", None):
        return fn(*args, **kwargs)


@needs_gpu
class EagerExtensionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        eager_extension.forget()
        cls.module = eager_extension.load()

    def setUp(self):
        self.assertIsNotNone(self.module, eager_extension.failure())
        fast_calls.clear()
        with torch.no_grad():
            call(step_inputs(0))  # checked, and handed to the module
        self.assertEqual(self.module.stats()[0], 1)

    def replays(self):
        return self.module.stats()[1]

    def test_a_replay_launches_what_the_python_path_launches(self):
        theirs = step_inputs(1)
        ours = cloned(theirs)
        before = self.replays()
        with torch.no_grad():
            o, pool = call(ours)
            o_py, pool_py = python_path(call, theirs)
        self.assertEqual(self.replays(), before + 1)
        self.assertIs(pool, ours["initial_state"])  # the pool, in place
        self.assertTrue(torch.isfinite(o).all())
        self.assertTrue(torch.equal(o, o_py))
        self.assertTrue(torch.equal(pool, pool_py))
        # Slots no sequence uses keep their bits.
        unused = torch.ones(SLOTS, dtype=torch.bool, device="cuda")
        unused[ours["ssm_state_indices"].long()] = False
        before_pool = step_inputs(1)["initial_state"]
        self.assertTrue(torch.equal(pool[unused], before_pool[unused]))

    def test_each_replay_allocates_its_own_output(self):
        inputs = step_inputs(2)
        with torch.no_grad():
            o1, _ = call(inputs)
            o2, _ = call(inputs)
        self.assertIsNot(o1, o2)
        self.assertNotEqual(o1.data_ptr(), o2.data_ptr())
        self.assertEqual((o2.shape, o2.dtype), ((B, 1, HV, V), torch.bfloat16))

    def test_the_fla_form_allocates_the_final_state(self):
        def fla_form(inputs):
            inputs = dict(inputs, initial_state=inputs["initial_state"][:B])
            return lina.fused_recurrent_kda(
                **inputs, output_final_state=True,
                use_qk_l2norm_in_kernel=True)

        with torch.no_grad():
            fla_form({k: v for k, v in step_inputs(3, "kda").items()
                      if k != "ssm_state_indices"})
            theirs = {k: v for k, v in step_inputs(4, "kda").items()
                      if k != "ssm_state_indices"}
            ours = cloned(theirs)
            before = self.replays()
            o, final = fla_form(ours)
            o_py, final_py = python_path(fla_form, theirs)
        self.assertEqual(self.replays(), before + 1)
        self.assertEqual(final.dtype, torch.float32)
        self.assertEqual(final.shape, (B, HV, K, V))
        self.assertTrue(torch.isfinite(final).all())
        self.assertTrue(torch.equal(o, o_py))
        self.assertTrue(torch.equal(final, final_py))

    def test_a_replay_runs_on_the_current_stream(self):
        theirs = step_inputs(5)
        ours = cloned(theirs)
        with torch.no_grad():
            o_py, pool_py = python_path(call, theirs)
            out = torch.full_like(o_py, float("nan"))
            call(cloned(theirs), out=out.clone())  # checked: remembered
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            # The default stream is busy for a while: a launch that went
            # there instead of the side stream would not be done when the
            # side stream is.
            torch.cuda._sleep(200_000_000)
            with torch.cuda.stream(side):
                before = self.replays()
                call(ours, out=out)
                self.assertEqual(self.replays(), before + 1)
            side.synchronize()
            with torch.cuda.stream(side):
                same_o = torch.equal(out, o_py)
                same_pool = torch.equal(ours["initial_state"], pool_py)
            torch.cuda.synchronize()
        self.assertTrue(same_o)
        self.assertTrue(same_pool)

    def test_a_launch_the_library_refuses_raises_the_checked_paths_error(self):
        inputs = step_inputs(6)
        # v one element past an 8-byte boundary: same shape and strides, so
        # the same key, but the library refuses the pointer.
        base = torch.empty(inputs["v"].numel() + 1, dtype=torch.bfloat16,
                           device="cuda")
        inputs["v"] = base[1:].view(B, 1, HV, V)
        before = self.replays()
        with torch.no_grad(), self.assertRaises(lina.LinaError) as cm:
            call(inputs)
        self.assertIn("'v' is not aligned", str(cm.exception))
        self.assertEqual(self.replays(), before)

    def test_a_replay_captured_in_a_cuda_graph_equals_the_eager_step(self):
        static = step_inputs(7)
        out = torch.empty(B, 1, HV, V, dtype=torch.bfloat16, device="cuda")
        with torch.no_grad():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                call(cloned(static), out=out)  # warm, off the capture
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            before = self.replays()
            with torch.cuda.graph(graph):
                call(static, out=out)
            self.assertEqual(self.replays(), before + 1)
            fresh = step_inputs(8)
            for name, t in fresh.items():
                static[name].copy_(t)
            out.fill_(float("nan"))
            graph.replay()
            o_eager, pool_eager = python_path(call, fresh)
            torch.cuda.synchronize()
        self.assertTrue(torch.equal(out, o_eager))
        self.assertTrue(torch.equal(static["initial_state"], pool_eager))


if __name__ == "__main__":
    unittest.main()
