"""The serving engines' decode layouts in the Python binding, without a GPU
or torch (test_args.py's stand-in tensors):

    python3 -m unittest discover -s test/python -p test_decode_layouts.py

- every check of packed tokens (cu_seqlens), state_v_first, the
  intermediate state buffer and disable_state_update, raised before liblina
  is touched, with the fix in the message;
- what a valid call hands to the launch: the cu_seqlens tensor itself (no
  copy: the call stays capturable), the sequences' count, the state order
  and the buffer (needs liblina.so for the spec text).
"""
from __future__ import annotations

import unittest
from unittest import mock

from test_args import T, needs_library, qkv

import lina  # noqa: E402  (test_args put python/ on sys.path)
from lina import decode, decode_ops  # noqa: E402

F32 = dict(dtype="float32")
I32 = dict(dtype="int32")
HV, K, V = 4, 32, 16


def packed(tokens=5):
    """q, k, v [1, tokens, ...] and gdn's g and beta."""
    q, k, v = qkv(B=1, T_=tokens)
    return q, k, v, T(1, tokens, HV, **F32), T(1, tokens, HV, **F32)


class LayoutChecksTest(unittest.TestCase):
    """Every error is raised before liblina is touched."""

    def setUp(self):
        def forbidden(*a, **k):
            raise AssertionError("reached the library before the checks "
                                 "failed")
        self.patches = [mock.patch.object(decode_ops, name, forbidden)
                        for name in ("build_spec", "get_decode_kernel",
                                     "launch_decode")]
        for p in self.patches:
            p.start()

    def tearDown(self):
        for p in self.patches:
            p.stop()

    def check(self, message, error=ValueError, tokens=5, **kwargs):
        q, k, v, g, beta = packed(tokens)
        with self.assertRaises(error) as cm:
            lina.fused_recurrent_gated_delta_rule(q, k, v, g, beta=beta,
                                                  **kwargs)
        self.assertIn(message, str(cm.exception))

    def test_cu_seqlens(self):
        self.check("'cu_seqlens' must be torch.int32 or torch.int64 (each "
                   "sequence's token offsets, read in place), got "
                   "torch.float32", cu_seqlens=T(3, **F32))
        self.check("'cu_seqlens' must be contiguous",
                   cu_seqlens=T(3, contiguous=False, **I32))
        self.check("'cu_seqlens' must be on a CUDA device",
                   cu_seqlens=T(3, device="cpu", **I32))
        self.check("'cu_seqlens' must have shape [N + 1] with N >= 1 "
                   "sequences, got [1]", cu_seqlens=T(1, **I32))
        self.check("got [3, 2]", cu_seqlens=T(3, 2, **I32))
        # Packed calls have no 16-token limit per call (the tokens are
        # many sequences'), so only [B, T] calls are held to it.
        self.check("decode takes 1 to 16 tokens per sequence", tokens=17)

    def test_the_pool_in_either_order(self):
        cu, idx = T(3, **I32), T(2, **I32)
        self.check("'initial_state' (the state pool) must have shape "
                   "[num_slots, HV, V, K] = [num_slots, 4, 16, 32], got "
                   "[6, 4, 32, 16]", cu_seqlens=cu, ssm_state_indices=idx,
                   initial_state=T(6, HV, K, V, **F32), state_v_first=True)
        self.check("'ssm_state_indices' must have shape [N] = [2] (a slot per "
                   "sequence) or [N, S] = [2, S], 1 <= S <= 16", cu_seqlens=cu,
                   initial_state=T(6, HV, K, V, **F32),
                   ssm_state_indices=T(2, 17, **I32))
        self.check("got [3]", cu_seqlens=cu,
                   initial_state=T(6, HV, K, V, **F32),
                   ssm_state_indices=T(3, **I32))
        self.check("'num_accepted_tokens' must have shape [B] = [2], got [5]",
                   cu_seqlens=cu, initial_state=T(6, HV, K, V, **F32),
                   ssm_state_indices=T(2, 4, **I32),
                   num_accepted_tokens=T(5, **I32))
        self.check("'state_v_first' must be a bool, got a tensor", TypeError,
                   state_v_first=T(1))

    def test_fla_form_states(self):
        # N sequences, not the batch of 1 of packed q.
        self.check("'initial_state' must have shape [N, HV, K, V] = [2, 4, 32, "
                   "16], got [1, 4, 32, 16]", cu_seqlens=T(3, **I32),
                   initial_state=T(1, HV, K, V, **F32))
        self.check("'initial_state' must have shape [N, HV, V, K] = [2, 4, 16, "
                   "32], got [2, 4, 32, 16]", cu_seqlens=T(3, **I32),
                   initial_state=T(2, HV, K, V, **F32), state_v_first=True,
                   inplace_final_state=True)

    def test_intermediate_states(self):
        pool = dict(initial_state=T(6, HV, K, V, **F32),
                    ssm_state_indices=T(2, **I32))
        q, k, v = qkv(B=2, T_=3)
        g, beta = T(2, 3, HV, **F32), T(2, 3, HV, **F32)

        def call(message, **kwargs):
            with self.assertRaises(ValueError) as cm:
                lina.fused_recurrent_gated_delta_rule(
                    q, k, v, g, beta=beta, **dict(pool, **kwargs))
            self.assertIn(message, str(cm.exception))

        call("'intermediate_states_buffer' must be torch.float32 (the kernel "
             "writes the states there), got torch.bfloat16",
             intermediate_states_buffer=T(6, 3, HV, K, V))
        call("'intermediate_states_buffer' must have shape [rows, steps, HV, "
             "K, V] = [rows, steps, 4, 32, 16], got [6, 3, 4, 16, 32]",
             intermediate_states_buffer=T(6, 3, HV, V, K, **F32))
        call("keeps 2 steps per sequence but the call has T = 3 tokens: give "
             "a buffer with at least T steps",
             intermediate_states_buffer=T(6, 2, HV, K, V, **F32))
        call("'intermediate_state_indices' must have shape [N] = [2], got [3]",
             intermediate_states_buffer=T(6, 3, HV, K, V, **F32),
             intermediate_state_indices=T(3, **I32))
        call("'intermediate_state_indices' must be torch.int32",
             intermediate_states_buffer=T(6, 3, HV, K, V, **F32),
             intermediate_state_indices=T(2, dtype="int64"))
        call("'intermediate_state_indices' picks rows of "
             "intermediate_states_buffer: give the buffer too",
             intermediate_state_indices=T(2, **I32))
        call("disable_state_update=True leaves the pool's slots as they were: "
             "it needs the state pool with ssm_state_indices [N]",
             disable_state_update=True, ssm_state_indices=T(2, 3, **I32))
        with self.assertRaises(ValueError) as cm:
            lina.fused_recurrent_gated_delta_rule(q, k, v, g, beta=beta,
                                                  disable_state_update=True)
        self.assertIn("it needs the state pool", str(cm.exception))


class LaunchRecorder:
    def __init__(self):
        self.calls = []

    def get_decode_kernel(self, text, schedule, device):
        return text

    def launch_decode(self, kernel, inputs, state, where, **kw):
        self.calls.append(dict(inputs=inputs, state=state, **kw))
        return "o", "final_state"


@needs_library
class WhatTheLaunchGetsTest(unittest.TestCase):
    def setUp(self):
        self.rec = LaunchRecorder()
        self.patches = [mock.patch.object(decode_ops, name,
                                          getattr(self.rec, name))
                        for name in ("get_decode_kernel", "launch_decode")]
        for p in self.patches:
            p.start()

    def tearDown(self):
        for p in self.patches:
            p.stop()

    def test_vllm_spec_decode(self):
        # vLLM: [1, tokens] with int32 query_start_loc, a [V, K] pool, a row
        # of slots per request and the accepted counts.
        q, k, v, g, beta = packed(8)
        cu, idx, acc = T(3, **I32), T(2, 4, **I32), T(2, **I32)
        pool = T(9, HV, V, K, **F32)
        lina.fused_recurrent_gated_delta_rule(
            q, k, v, g, beta=beta, initial_state=pool, cu_seqlens=cu,
            ssm_state_indices=idx, num_accepted_tokens=acc,
            inplace_final_state=True, state_v_first=True)
        call = self.rec.calls[-1]
        layout, state = call["layout"], call["state"]
        self.assertIs(layout.cu_seqlens, cu)
        self.assertEqual((layout.batch, layout.tokens, layout.v_first),
                         (2, None, True))
        self.assertIs(state.pool, pool)
        self.assertTrue(state.per_token)
        self.assertEqual(decode._seq_len(state, layout), 4)
        self.assertEqual((call["inputs"].batch, call["inputs"].seq_len),
                         (1, 8))

    def test_flashinfer_verification(self):
        q, k, v = qkv(B=2, T_=3)
        g, beta = T(2, 3, HV, **F32), T(2, 3, HV, **F32)
        buffer, rows = T(6, 4, HV, K, V, **F32), T(2, **I32)
        lina.fused_recurrent_kda(
            q, k, v, T(2, 3, HV, K, **F32), beta,
            initial_state=T(6, HV, K, V, **F32), ssm_state_indices=T(2, **I32),
            intermediate_states_buffer=buffer,
            intermediate_state_indices=rows, disable_state_update=True)
        layout = self.rec.calls[-1]["layout"]
        self.assertIs(layout.intermediate, buffer)
        self.assertIs(layout.intermediate_indices, rows)
        self.assertTrue(layout.disable_state_update)
        self.assertEqual(decode._seq_len(self.rec.calls[-1]["state"], layout),
                         3)

    def test_packed_fla_form(self):
        # fla's varlen form: a state per sequence in, a new one out; the
        # deprecated transpose_state_layout is state_v_first.
        q, k, v, g, beta = packed(5)
        h0 = T(3, HV, V, K)  # bf16: converted, not written
        lina.fused_recurrent_gated_delta_rule(
            q, k, v, g, beta=beta, initial_state=h0, output_final_state=True,
            cu_seqlens=T(4, dtype="int64"), transpose_state_layout=True)
        call = self.rec.calls[-1]
        self.assertIs(call["state"].initial.copied_from, h0)
        self.assertEqual((call["layout"].batch, call["layout"].v_first),
                         (3, True))
        self.assertEqual(call["layout"].state_dims(K, V), ([V, K], "V, K"))
        self.assertTrue(call["output_final_state"])


if __name__ == "__main__":
    unittest.main()
