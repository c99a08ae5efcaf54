"""``lina.tune`` (``lina_tune`` through ctypes), without a GPU: simulated
tunes on the cost model.

    python3 -m unittest discover -s test/python -p test_tune.py   (repo root)

A process opens lina's cache once, at its first use, so each tune that
needs a cache of its own runs in a child process with its own
``LINA_CACHE_DIR``. On a machine with a GPU, a real tune's winner is checked
to be what ``lina.compile`` builds for a shape of the same bucket.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import lina  # noqa: E402
from lina import _capi  # noqa: E402


def have_library() -> bool:
    try:
        _capi.library()
        return True
    except lina.LinaError:
        return False


HAVE_LIBRARY = have_library()


def have_gpu() -> bool:
    if not HAVE_LIBRARY:
        return False
    spec = _capi.preset_spec("gla", 64, 64, 2, 2, "bf16")
    try:
        _capi.kernel_destroy(_capi.kernel_create(spec, None, 0))
    except lina.LinaError as e:
        return e.status != lina.Status.NO_DRIVER
    return True


needs_library = unittest.skipUnless(HAVE_LIBRARY, "liblina.so not found "
                                    "(cmake --build build --target LinaShared)")

# Prints the result of lina.tune(*ARGS, **KWARGS) as JSON, or the error.
CHILD = textwrap.dedent("""
    import dataclasses, json, sys
    sys.path.insert(0, sys.argv[1])
    import lina
    args, kwargs = json.loads(sys.argv[2])
    try:
        r = lina.tune(*args, **kwargs)
        print(json.dumps({"result": dataclasses.asdict(r)}))
    except lina.LinaError as e:
        print(json.dumps({"error": str(e), "status": int(e.status)}))
""")


def tune_in_child(cache_dir: str, *args, **kwargs) -> dict:
    env = dict(os.environ, LINA_CACHE_DIR=cache_dir)
    run = subprocess.run([sys.executable, "-c", CHILD, str(REPO / "python"),
                          json.dumps([args, kwargs])],
                         capture_output=True, text=True, env=env, timeout=600)
    if run.returncode != 0:
        raise AssertionError(f"the child failed:\n{run.stderr}")
    return json.loads(run.stdout)


KDA = ("kda", 2, 256)
KDA_FIELDS = {"key_dim": 64, "value_dim": 64, "heads": 4, "simulate": True}


@needs_library
class SimulatedTuneTest(unittest.TestCase):
    def test_a_winner_is_recorded_and_read_back_by_the_next_process(self):
        with tempfile.TemporaryDirectory() as d:
            first = tune_in_child(d, *KDA, **KDA_FIELDS)["result"]
            s = first["schedule"]
            self.assertIn(s["chunk_size"], (16, 32, 64, 128))
            self.assertIn(s["tile_v"], (16, 32, 64))
            self.assertIn(s["warps"], (2, 4, 8))
            self.assertIn(s["strategy"], ("fused", "materialize", "split"))
            self.assertIsInstance(s["prefetch"], bool)
            self.assertGreaterEqual(s["segments"], 1)
            self.assertGreater(first["ms"], 0)
            self.assertGreater(first["candidates"], first["pruned"] > 0)
            self.assertTrue(0 < first["tried"] <= 12, first)
            self.assertEqual(first["recorded"], 0)
            self.assertTrue(first["saved"])
            self.assertIsNone(first["not_saved_reason"])
            self.assertTrue((Path(d) / "lina.db").is_file())
            # Another process, another shape of the bucket: nothing is timed
            # again, and the winner is the same.
            again = tune_in_child(d, "kda", 2, 200,
                                  **KDA_FIELDS)["result"]
            self.assertEqual(again["tried"], 0)
            self.assertEqual(again["recorded"], first["tried"])
            self.assertEqual(again["schedule"], first["schedule"])
            self.assertEqual(again["ms"], first["ms"])
            # A full sweep looks at every viable candidate.
            full = tune_in_child(d, *KDA, mode="full", **KDA_FIELDS)["result"]
            self.assertEqual(full["tried"] + full["recorded"],
                             full["candidates"] - full["pruned"])
            self.assertLessEqual(full["ms"], first["ms"])

    def test_spec_text_and_fields(self):
        text = lina.spec_text("mine", {
            "decay": "scalar", "update": "additive", "key_dim": 64,
            "value_dim": 64, "heads": 2, "value_heads": 2, "dtype": "bf16"})
        with tempfile.TemporaryDirectory() as d:
            r = tune_in_child(d, text, 1, 1000, simulate=True,
                              initial_state=True)["result"]
        self.assertTrue(r["saved"])
        self.assertGreater(r["tried"], 0)

    def test_a_backward_tune_is_recorded_apart_from_the_forwards(self):
        fields = dict(KDA_FIELDS, backward=True)
        with tempfile.TemporaryDirectory() as d:
            first = tune_in_child(d, *KDA, **fields)["result"]
            # The backward's schedule has three knobs.
            self.assertEqual(set(first["schedule"]),
                             {"chunk_size", "tile_v", "warps"})
            self.assertIn(first["schedule"]["chunk_size"], (16, 32, 64, 128))
            self.assertGreater(first["ms"], 0)
            self.assertTrue(0 < first["tried"] <= 12, first)
            self.assertTrue(first["saved"])
            again = tune_in_child(d, *KDA, **fields)["result"]
            self.assertEqual(again["tried"], 0)
            self.assertEqual(again["schedule"], first["schedule"])
            # The forward's tune of the same spec finds none of it.
            forward = tune_in_child(d, *KDA, **KDA_FIELDS)["result"]
            self.assertEqual(forward["recorded"], 0)
            self.assertIn("strategy", forward["schedule"])

    def test_an_unusable_cache_is_reported_not_saved(self):
        r = tune_in_child("/dev/null/x", *KDA, **KDA_FIELDS)["result"]
        self.assertGreater(r["ms"], 0)
        self.assertFalse(r["saved"])
        self.assertIn("cannot use the cache directory /dev/null/x",
                      r["not_saved_reason"])


@needs_library
class BadArgumentsTest(unittest.TestCase):
    def test_shape_mode_and_keywords(self):
        for kwargs, error, message in (
                ({"batch": 0}, ValueError, "'batch' must be an int of at "
                                           "least 1, got 0"),
                ({"seq_len": 0}, ValueError, "'seq_len' must be an int of at "
                                             "least 1, got 0"),
                ({"batch": 2.0}, ValueError, "'batch' must be an int"),
                ({"mode": "quick"}, ValueError, "'mode' must be 'fast' or "
                                                "'full', got 'quick'"),
                ({"simulate": 1}, ValueError, "'simulate' must be True or "
                                              "False"),
                ({"backward": "yes"}, ValueError, "'backward' must be True or "
                                                  "False"),
                ({"colour": 1}, TypeError, "unknown keyword 'colour'"),
                ({"spec": None}, TypeError, "spec must be a str"),
                ({"key_dim": None}, ValueError, "a preset needs key_dim")):
            call = {"spec": "gdn", "batch": 1, "seq_len": 64,
                    "key_dim": 64, "value_dim": 64, "heads": 2,
                    "simulate": True}
            call.update(kwargs)
            with self.subTest(kwargs), self.assertRaisesRegex(error, message):
                lina.tune(call.pop("spec"), call.pop("batch"),
                          call.pop("seq_len"), **call)

    def test_unknown_preset_and_bad_spec_are_liblinas(self):
        with self.assertRaises(lina.LinaError) as cm:
            lina.tune("gdm", 1, 64, key_dim=64, value_dim=64, heads=2,
                      simulate=True)
        self.assertEqual(cm.exception.status, lina.Status.INVALID_ARGUMENT)
        self.assertIn("unknown preset 'gdm'; did you mean 'gdn'?",
                      str(cm.exception))
        with self.assertRaises(lina.LinaError) as cm:
            lina.tune("gdn", 1, 64, key_dim=64, value_dim=64, heads=2,
                      value_heads=3, simulate=True)
        self.assertEqual(cm.exception.status, lina.Status.INVALID_ARGUMENT)
        self.assertIn("multiple of heads", str(cm.exception))

    def test_without_a_gpu_only_a_simulated_tune_runs(self):
        if have_gpu():
            self.skipTest("a GPU is present: the no-driver path cannot be "
                          "shown")
        with self.assertRaises(lina.LinaError) as cm:
            lina.tune("gdn", 1, 64, key_dim=64, value_dim=64, heads=2)
        self.assertEqual(cm.exception.status, lina.Status.NO_DRIVER)
        self.assertIn("lina_tune: NO_DRIVER: no CUDA driver found",
                      str(cm.exception))
        self.assertIn("simulate = 1 tunes on the cost model", str(cm.exception))


# The whole loop, on a GPU: the winner is what a kernel for a shape of the
# same bucket is built with.
REAL = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import lina
    fields = dict(key_dim=64, value_dim=64, heads=2)
    before = lina.compile("gla", batch=2, seq_len=1000, **fields).schedule
    r = lina.tune("gla", 2, 1000, **fields)
    after = lina.compile("gla", batch=2, seq_len=900, **fields).schedule
    print(json.dumps({"before": before, "tuned": r.schedule, "after": after,
                      "saved": r.saved, "tried": r.tried}))
""")


# The same for the backward: what a call's backward of that bucket gets.
REAL_BACKWARD = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import lina
    from lina import _capi, autograd
    fields = dict(key_dim=64, value_dim=64, heads=2)
    text = _capi.preset_spec("gla", 64, 64, 2, 2, "bf16")
    r = lina.tune("gla", 2, 1000, backward=True, **fields)
    after = autograd.get_backward_kernel(text, 0, shape=(2, 900, 2)).schedule
    print(json.dumps({"tuned": r.schedule, "after": after,
                      "saved": r.saved, "tried": r.tried}))
""")


@unittest.skipUnless(have_gpu(), "no GPU: a real tune cannot run (a "
                     "simulated one is recorded for a GPU no device matches)")
class RealTuneTest(unittest.TestCase):
    def test_kernels_of_the_bucket_use_the_winner(self):
        with tempfile.TemporaryDirectory() as d:
            run = subprocess.run([sys.executable, "-c", REAL,
                                  str(REPO / "python")],
                                 capture_output=True, text=True, timeout=600,
                                 env=dict(os.environ, LINA_CACHE_DIR=d))
        self.assertEqual(run.returncode, 0, run.stderr)
        r = json.loads(run.stdout)
        self.assertTrue(r["saved"])
        self.assertGreater(r["tried"], 0)
        self.assertEqual(r["after"], r["tuned"], r)

    def test_a_backward_of_the_bucket_uses_the_backward_winner(self):
        with tempfile.TemporaryDirectory() as d:
            run = subprocess.run([sys.executable, "-c", REAL_BACKWARD,
                                  str(REPO / "python")],
                                 capture_output=True, text=True, timeout=600,
                                 env=dict(os.environ, LINA_CACHE_DIR=d))
        self.assertEqual(run.returncode, 0, run.stderr)
        r = json.loads(run.stdout)
        self.assertTrue(r["saved"])
        self.assertGreater(r["tried"], 0)
        self.assertEqual(r["after"], r["tuned"], r)


if __name__ == "__main__":
    unittest.main()
