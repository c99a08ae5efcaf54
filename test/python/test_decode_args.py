"""Tests of the decode functions of the Python binding that need no GPU and
no torch (the stand-in tensors of test_args.py):

    python3 -m unittest discover -s test/python -p test_decode_args.py

- every argument check of the fused_recurrent_* functions, raised before
  liblina or torch is touched: tokens per call, the state pool and its
  int32 slot indices, num_accepted_tokens, the fla state form, the knobs;
- which spec, schedule and state form each call asks for (the kernel and the
  launch are recorders; needs liblina.so for lina_preset_spec);
- lina_decode_* through ctypes (bad spec, no driver, NULLs) and the ctypes
  struct layouts against lina_c.h (needs a C compiler).
"""
from __future__ import annotations

import ctypes
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from test_args import REPO, T, needs_library, qkv

import lina  # noqa: E402  (test_args put python/ on sys.path)
from lina import _capi, decode, decode_ops, spec  # noqa: E402

F32 = dict(dtype="float32")
I32 = dict(dtype="int32")


def pool(slots=6, HV=4, K=32, V=16, **kw):
    return T(slots, HV, K, V, **dict(F32, **kw))


class DecodeArgumentChecksTest(unittest.TestCase):
    """Every error must be raised before liblina or torch is touched."""

    def setUp(self):
        def forbidden(*a, **k):
            raise AssertionError("reached the library before the checks failed")
        self.patches = [mock.patch.object(decode_ops, "build_spec", forbidden),
                        mock.patch.object(decode_ops, "get_decode_kernel",
                                          forbidden),
                        mock.patch.object(decode_ops, "launch_decode",
                                          forbidden)]
        for p in self.patches:
            p.start()

    def tearDown(self):
        for p in self.patches:
            p.stop()

    def check(self, message, fn, *args, error=ValueError, **kwargs):
        with self.assertRaises(error) as cm:
            fn(*args, **kwargs)
        self.assertIn(message, str(cm.exception))

    def gdn(self, T_=1, **kw):
        q, k, v = qkv(B=2, T_=T_)
        return lina.fused_recurrent_gated_delta_rule(
            q, k, v, g=T(2, T_, 4, **F32), beta=T(2, T_, 4, **F32), **kw)

    def test_tokens_per_call(self):
        self.check("decode takes 1 to 16 tokens per sequence, got T = 17",
                   self.gdn, T_=17)
        self.check("got T = 0", self.gdn, T_=0)
        self.check("run prompts through the chunk_* function", self.gdn,
                   T_=40)

    def test_packed_sequences_need_one_row(self):
        self.check("with cu_seqlens the tokens are packed: q must be "
                   "[1, num_tokens, H, K], got batch 2", self.gdn,
                   cu_seqlens=T(3, dtype="int64"))

    def test_the_state_pool(self):
        idx = T(2, **I32)
        self.check("'initial_state' is the state pool", self.gdn,
                   ssm_state_indices=idx)
        self.check("'initial_state' must be torch.float32 (the state pool is "
                   "updated in place), got torch.bfloat16", self.gdn,
                   initial_state=pool(dtype="bfloat16"), ssm_state_indices=idx)
        self.check("'initial_state' must be contiguous", self.gdn,
                   initial_state=pool(contiguous=False), ssm_state_indices=idx)
        self.check("must have shape [num_slots, HV, K, V] = [num_slots, 4, "
                   "32, 16], got [6, 4, 16, 32]", self.gdn,
                   initial_state=T(6, 4, 16, 32, **F32), ssm_state_indices=idx)
        self.check("'initial_state' is on cuda:1 but q is on cuda:0", self.gdn,
                   initial_state=pool(device="cuda:1"), ssm_state_indices=idx)
        self.check("with ssm_state_indices the pool is updated in place",
                   self.gdn, initial_state=pool(), ssm_state_indices=idx,
                   inplace_final_state=False)
        self.check("output_final_state=True is not supported", self.gdn,
                   initial_state=pool(), ssm_state_indices=idx,
                   output_final_state=True)

    def test_slot_indices(self):
        self.check("'ssm_state_indices' must be torch.int32 (convert once with "
                   ".to(torch.int32)), got torch.int64", self.gdn,
                   initial_state=pool(), ssm_state_indices=T(2, dtype="int64"))
        self.check("must have shape [B] = [2] (a slot per sequence) or [B, T] "
                   "= [2, 3] (a slot per token), got [3]", self.gdn, T_=3,
                   initial_state=pool(), ssm_state_indices=T(3, **I32))
        self.check("'ssm_state_indices' must be on a CUDA device", self.gdn,
                   initial_state=pool(),
                   ssm_state_indices=T(2, device="cpu", **I32))

    def test_num_accepted_tokens(self):
        self.check("'num_accepted_tokens' needs ssm_state_indices [B, T]",
                   self.gdn, T_=3, initial_state=pool(),
                   ssm_state_indices=T(2, **I32),
                   num_accepted_tokens=T(2, **I32))
        self.check("'num_accepted_tokens' needs ssm_state_indices", self.gdn,
                   num_accepted_tokens=T(2, **I32))
        self.check("'num_accepted_tokens' must be torch.int32", self.gdn,
                   T_=3, initial_state=pool(), ssm_state_indices=T(2, 3, **I32),
                   num_accepted_tokens=T(2, dtype="int64"))
        self.check("'num_accepted_tokens' must have shape [B] = [2], got [3]",
                   self.gdn, T_=3, initial_state=pool(),
                   ssm_state_indices=T(2, 3, **I32),
                   num_accepted_tokens=T(3, **I32))

    def test_the_fla_state_form(self):
        self.check("inplace_final_state=True needs an initial_state",
                   self.gdn, inplace_final_state=True, output_final_state=True)
        self.check("'initial_state' must be torch.float32 (inplace_final_state"
                   "=True writes the final state into it)", self.gdn,
                   initial_state=T(2, 4, 32, 16), inplace_final_state=True)
        self.check("'initial_state' must have shape [N, HV, K, V] = [2, 4, 32, "
                   "16], got [3, 4, 32, 16]", self.gdn,
                   initial_state=T(3, 4, 32, 16, **F32))

    def test_gates_and_knobs(self):
        q, k, v = qkv(B=2, T_=1)
        beta = T(2, 1, 4, **F32)
        fn = lina.fused_recurrent_gated_delta_rule
        self.check("give g or gk, not both", fn, q, k, v, g=T(2, 1, 4, **F32),
                   gk=T(2, 1, 4, 32, **F32), beta=beta)
        self.check("gv (per-value-channel decay) is not supported", fn, q, k,
                   v, beta=beta, gv=T(2, 1, 4, 16, **F32))
        self.check("'beta' is required (fla's beta=None means beta = 1",
                   fn, q, k, v, g=T(2, 1, 4, **F32))
        self.check("'beta' is required", lina.fused_recurrent_delta_rule, q,
                   k, v)
        # lina's earlier order (q, k, v, g, beta) puts beta where fla has gk
        self.check("beta is the seventh argument, as in fla (q, k, v, g, gk, "
                   "gv, beta, ...); pass beta=beta", fn, q, k, v,
                   T(2, 1, 4, **F32), beta)
        self.check("'state_v_first' must be a bool, got a tensor",
                   lina.fused_recurrent_kda, q, k, v, T(2, 1, 4, 32, **F32),
                   beta, None, None, None, None, False, False, False, False,
                   False, None, T(2, **F32), error=TypeError)
        # ... and cu_seqlens where fla has reverse
        self.check("'reverse' must be a bool, got a tensor",
                   lina.fused_recurrent_gla, q, k, v, None, None, None, None,
                   False, T(3, dtype="int64"), error=TypeError)
        self.check("use lina.fused_recurrent_kda", fn, q, k, v,
                   gk=T(2, 1, 4, 32, **F32), beta=beta, use_gate_in_kernel=True,
                   A_log=T(4, **F32))
        self.check("'g' must have shape [B, T, HV, K] = [2, 1, 4, 32]",
                   lina.fused_recurrent_kda, q, k, v, T(2, 1, 4, **F32), beta)
        self.check("decode schedule 'warp_columns' must be one of 4, 8, 16",
                   self.gdn, warp_columns=32)
        self.check("decode schedule 'warps' must be one of 1, 2, 3", self.gdn,
                   warps=9)
        self.check("reverse=True is not supported",
                   lina.fused_recurrent_simple_gla, q, k, v, reverse=True)
        self.check("unexpected keyword argument 'chunk_size'", self.gdn,
                   error=TypeError, chunk_size=64)
        self.check("'a' is required", lina.fused_recurrent_dplr_delta_rule, q,
                   k, v, None, T(2, 1, 4, 32), T(2, 1, 4, 32, **F32))


class DecodeRecorder:
    def __init__(self):
        self.calls = []

    def get_decode_kernel(self, text, schedule, device):
        self.calls.append({"text": text, "schedule": schedule})
        return text

    def launch_decode(self, kernel, inputs, state, where, **kw):
        self.calls[-1].update(inputs=inputs, state=state, **kw)
        return "o", "final_state"


@needs_library
class SpecOfEachDecodeCallTest(unittest.TestCase):
    def setUp(self):
        self.rec = DecodeRecorder()
        self.patches = [
            mock.patch.object(decode_ops, "get_decode_kernel",
                              self.rec.get_decode_kernel),
            mock.patch.object(decode_ops, "launch_decode",
                              self.rec.launch_decode),
            mock.patch.object(decode_ops, "retention_log_decay",
                              lambda HV, device: T(HV, **F32)),
            mock.patch.object(decode_ops, "_zeros_like_heads",
                              lambda v, HV: T(HV, **F32)),
        ]
        for p in self.patches:
            p.start()

    def tearDown(self):
        for p in self.patches:
            p.stop()

    def last(self):
        call = self.rec.calls[-1]
        name, fields = spec.parse_spec_text(call["text"])
        return name, fields, call

    def test_presets_and_options(self):
        q, k, v = qkv(B=2, T_=2, H=2, HV=4, K=32, V=16)
        g3, g4 = T(2, 2, 4, **F32), T(2, 2, 4, 32, **F32)
        beta, ab = T(2, 2, 4, **F32), T(2, 2, 4, 32)
        cases = [
            (lambda: lina.fused_recurrent_gated_delta_rule(q, k, v, g3,
                                                           beta=beta),
             "gdn", {"qk_l2norm": False}),
            # fla's positions: g, gk, gv, beta, scale, initial_state,
            # output_final_state, use_qk_l2norm_in_kernel
            (lambda: lina.fused_recurrent_gated_delta_rule(
                q, k, v, g3, None, None, beta, 0.5, None, False, True),
             "gdn", {"qk_l2norm": True, "scale": 0.5}),
            (lambda: lina.fused_recurrent_gated_delta_rule(
                q, k, v, None, g4, None, beta), "kda", {}),
            (lambda: lina.fused_recurrent_delta_rule(q, k, v, beta, None, None,
                                                     False, True),
             "deltanet", {"qk_l2norm": True}),
            (lambda: lina.fused_recurrent_gated_delta_rule(
                q, k, v, gk=g4, beta=beta, use_qk_l2norm_in_kernel=True),
             "kda", {"qk_l2norm": True}),
            (lambda: lina.fused_recurrent_gated_delta_rule(q, k, v, beta=beta),
             "deltanet", {}),
            (lambda: lina.fused_recurrent_gated_delta_rule(
                q, k, v, g3, beta=beta, use_gate_in_kernel=True,
                A_log=T(4, **F32),
                use_beta_sigmoid_in_kernel=True, allow_neg_eigval=True),
             "gdn", {"gate": "softplus", "beta": "two_sigmoid"}),
            (lambda: lina.fused_recurrent_kda(
                q, k, v, g4, beta, use_gate_in_kernel=True, lower_bound=-5.0),
             "kda", {"gate": "lower_bound", "gate_lower_bound": -5.0}),
            (lambda: lina.fused_recurrent_delta_rule(q, k, v, beta),
             "deltanet", {"qk_l2norm": False}),
            (lambda: lina.fused_recurrent_simple_gla(q, k, v, g3), "mamba2",
             {}),
            (lambda: lina.fused_recurrent_simple_gla(q, k, v, g_gamma=T(4, **F32)),
             "retnet", {}),
            (lambda: lina.fused_recurrent_simple_gla(q, k, v), "linear_attn",
             {}),
            (lambda: lina.fused_recurrent_gla(q, k, v, g4), "gla", {}),
            (lambda: lina.fused_recurrent_retention(q, k, v), "retnet", {}),
            (lambda: lina.fused_recurrent_dplr_delta_rule(q, k, v, ab, ab, g4),
             "rwkv7", {}),
            (lambda: lina.fused_recurrent_gated_delta_rule(
                q, k, v, g3, beta=beta, scale=0.5), "gdn", {"scale": 0.5}),
        ]
        for call, preset, expected in cases:
            with self.subTest(preset=preset, expected=expected):
                call()
                name, fields, _ = self.last()
                self.assertEqual(name, preset)
                self.assertEqual((fields["key_dim"], fields["value_dim"],
                                  fields["heads"], fields["value_heads"],
                                  fields["dtype"]), (32, 16, 2, 4, "bf16"))
                for field, value in expected.items():
                    self.assertEqual(fields.get(field), value, field)

    def test_state_forms_and_schedule(self):
        q, k, v = qkv(B=2, T_=3, H=2, HV=4, K=32, V=16)
        g, beta = T(2, 3, 4, **F32), T(2, 3, 4, **F32)
        p, idx = pool(), T(2, 3, **I32)
        acc = T(2, **I32)
        lina.fused_recurrent_gated_delta_rule(
            q, k, v, g, beta=beta, initial_state=p, ssm_state_indices=idx,
            num_accepted_tokens=acc, warp_columns=16, warps=2)
        _, _, call = self.last()
        self.assertEqual(call["schedule"], (16, 2))
        state = call["state"]
        self.assertIs(state.pool, p)
        self.assertIs(state.indices, idx)
        self.assertIs(state.accepted, acc)
        self.assertTrue(state.per_token)

        lina.fused_recurrent_gated_delta_rule(
            q, k, v, g, beta=beta, initial_state=p, ssm_state_indices=T(2, **I32))
        state = self.last()[2]["state"]
        self.assertFalse(state.per_token)
        self.assertEqual(self.last()[2]["schedule"], (0, 0))

        h0 = T(2, 4, 32, 16)  # bf16: converted, not written
        lina.fused_recurrent_gated_delta_rule(
            q, k, v, g, beta=beta, initial_state=h0, output_final_state=True)
        _, _, call = self.last()
        self.assertIsNone(call["state"].pool)
        self.assertIs(call["state"].initial.copied_from, h0)
        self.assertTrue(call["output_final_state"])

        h0 = T(2, 4, 32, 16, **F32)
        lina.fused_recurrent_gated_delta_rule(
            q, k, v, g, beta=beta, initial_state=h0, inplace_final_state=True)
        state = self.last()[2]["state"]
        self.assertTrue(state.inplace)
        self.assertIs(state.initial, h0)


@needs_library
class DecodeCApiTest(unittest.TestCase):
    def test_varlen_spec_is_refused_with_the_fix(self):
        text = _capi.preset_spec("gdn", 64, 64, 2, 2, "bf16")
        name, fields = spec.parse_spec_text(text)
        fields["varlen"] = True
        with self.assertRaises(lina.LinaError) as cm:
            _capi.decode_create(spec.spec_text(name, fields),
                                _capi.DecodeSchedule(0, 0), 0)
        self.assertEqual(cm.exception.status, _capi.Status.INVALID_ARGUMENT)
        self.assertIn("set varlen = false", str(cm.exception))

    def test_bad_knob_names_the_choices(self):
        text = _capi.preset_spec("kda", 128, 128, 2, 2, "bf16")
        with self.assertRaises(lina.LinaError) as cm:
            _capi.decode_create(text, _capi.DecodeSchedule(32, 0), 0)
        self.assertIn("choose one of 4, 8, 16", str(cm.exception))

    def test_create_without_a_driver(self):
        text = _capi.preset_spec("rwkv7", 64, 64, 2, 2, "f32")
        try:
            handle = _capi.decode_create(text, None, 0)
        except lina.LinaError as e:
            self.assertEqual(e.status, _capi.Status.NO_DRIVER, str(e))
            self.assertIn("no CUDA driver found", str(e))
            return
        _capi.decode_destroy(handle)
        self.skipTest("a GPU is present: the no-driver path cannot be shown")

    def test_null_arguments(self):
        lib = _capi.library()
        status = lib.lina_decode_forward(None, None)
        self.assertEqual(status, _capi.Status.INVALID_ARGUMENT)
        self.assertIn("must not be NULL", _capi.last_error())
        self.assertEqual(lib.lina_decode_warp_columns(None, 1), 0)


DECODE_PROBE = r"""
#include <stddef.h>
#include <stdio.h>
#include "lina/lina_c.h"
#define F(T, f) printf(#T "." #f " %zu %zu\n", offsetof(T, f), sizeof(((T *)0)->f));
int main(void) {
  printf("lina_decode_schedule %zu\n", sizeof(lina_decode_schedule));
  printf("lina_decode_args %zu\n", sizeof(lina_decode_args));
  F(lina_decode_schedule, warp_columns) F(lina_decode_schedule, warps)
  F(lina_decode_args, q) F(lina_decode_args, k) F(lina_decode_args, v)
  F(lina_decode_args, g) F(lina_decode_args, beta) F(lina_decode_args, a)
  F(lina_decode_args, b) F(lina_decode_args, gate_a_log)
  F(lina_decode_args, gate_dt_bias) F(lina_decode_args, o)
  F(lina_decode_args, state) F(lina_decode_args, state_indices)
  F(lina_decode_args, num_accepted_tokens) F(lina_decode_args, num_slots)
  F(lina_decode_args, indices_per_token) F(lina_decode_args, initial_state)
  F(lina_decode_args, final_state) F(lina_decode_args, batch)
  F(lina_decode_args, seq_len) F(lina_decode_args, stream)
  F(lina_decode_args, cu_seqlens) F(lina_decode_args, cu_seqlens_int64)
  F(lina_decode_args, state_v_first) F(lina_decode_args, intermediate_states)
  F(lina_decode_args, intermediate_indices)
  F(lina_decode_args, num_intermediate) F(lina_decode_args, intermediate_steps)
  F(lina_decode_args, disable_state_update)
  return 0;
}
"""


@unittest.skipUnless(shutil.which("cc"), "no C compiler (cc)")
class DecodeStructLayoutTest(unittest.TestCase):
    def test_layouts_match_the_header(self):
        with tempfile.TemporaryDirectory() as d:
            src, exe = Path(d) / "probe.c", Path(d) / "probe"
            src.write_text(DECODE_PROBE)
            build = subprocess.run(["cc", "-I", str(REPO / "api" / "include"),
                                    str(src), "-o", str(exe)],
                                   capture_output=True, text=True, timeout=120)
            self.assertEqual(build.returncode, 0, build.stderr)
            out = subprocess.run([str(exe)], capture_output=True, text=True,
                                 timeout=60).stdout
        c = {}
        for line in out.splitlines():
            name, *values = line.split()
            c[name] = [int(x) for x in values]
        for cname, struct in (("lina_decode_schedule", _capi.DecodeSchedule),
                              ("lina_decode_args", _capi.DecodeArgs)):
            self.assertEqual(c[cname], [ctypes.sizeof(struct)])
            for field, _ in struct._fields_:
                descr = getattr(struct, field)
                self.assertEqual(c[f"{cname}.{field}"],
                                 [descr.offset, descr.size], f"{cname}.{field}")
            self.assertEqual(len(struct._fields_),
                             sum(1 for k in c if k.startswith(cname + ".")))


class DecodeScheduleTest(unittest.TestCase):
    def test_knobs(self):
        self.assertEqual(decode.make_decode_schedule(), (0, 0))
        self.assertEqual(decode.make_decode_schedule(8, 4), (8, 4))
        for bad in (3, True, 8.0, -4):
            with self.assertRaises(ValueError):
                decode.make_decode_schedule(bad, None)


if __name__ == "__main__":
    unittest.main()
