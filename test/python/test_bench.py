"""bench/compare_fla.py without a GPU: its arguments, `--tune`'s call of
`lina tune` (which must fail with the driver's message here), and `--report`,
which merges runs into the table docs/benchmarks.md keeps; and
bench/train_fla.py's arguments and its parallel warm-up of fla's kernels."""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
import types
import unittest
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import compare_fla  # noqa: E402
import train_fla  # noqa: E402


def case(form, shape, fla_ms, lina_ms, **extra):
    row = {"form": form, "shape": shape, "status": "ok", "rel_err": 4.9e-3,
           "fla_ms": fla_ms, "lina_ms": lina_ms, "speedup": fla_ms / lina_ms,
           "lina_GBps": 150.0, "bw_frac": 150 / 4250, "lina_TFLOPs": 20.0,
           "flop_frac": 20 / 700, "lina_first_s": 1.5}
    row.update(extra)
    return row


class ScheduleTextTest(unittest.TestCase):
    def test_names_a_schedule_as_lina_tune_does(self):
        s = {"chunk_size": 16, "tile_v": 128, "warps": 8, "strategy": "split"}
        self.assertEqual(compare_fla.schedule_text(s), "C16 tv128 w8 split")
        self.assertEqual(compare_fla.schedule_text({**s, "prefetch": True}),
                         "C16 tv128 w8 split prefetch")
        self.assertEqual(compare_fla.schedule_text(
            {**s, "prefetch": True, "segments": 8}),
            "C16 tv128 w8 split prefetch segments 8")
        self.assertEqual(compare_fla.schedule_text({**s, "segments": 1}),
                         "C16 tv128 w8 split")
        w = {"chunk_size": 64, "tile_v": 128, "warps": 8, "strategy": "fused",
             "prefetch": True, "segments": 1, "mma": "warpgroup"}
        self.assertEqual(compare_fla.schedule_text(w),
                         "C64 tv128 w8 fused prefetch warpgroup")
        self.assertEqual(compare_fla.schedule_text({**w, "mma": "warp"}),
                         "C64 tv128 w8 fused prefetch")


class ArgumentsTest(unittest.TestCase):
    def test_tune_excludes_fixed_knobs(self):
        with self.assertRaises(SystemExit):
            compare_fla.parse_args(["--tune", "fast", "--strategy", "split"])
        args = compare_fla.parse_args(["--tune", "full", "--forms", "gdn"])
        self.assertEqual((args.tune, args.forms), ("full", ["gdn"]))

    def test_every_form_has_a_preset(self):
        self.assertEqual(set(compare_fla.PRESETS), set(compare_fla.FORMS))


class TuneCommandTest(unittest.TestCase):
    def test_backward_asks_lina_tune_for_the_backward(self):
        calls = []

        def run(cmd, **kwargs):
            calls.append(cmd)
            return types.SimpleNamespace(returncode=0, stderr="",
                                         stdout="best: C32 tv32 w4, 1.0 ms\n")

        args = types.SimpleNamespace(dtype="bf16", tune="full",
                                     tune_timeout_s=60)
        with mock.patch.object(compare_fla, "lina_binary",
                               lambda: Path("/bin/lina")), \
                mock.patch.object(compare_fla.subprocess, "run", run):
            best = [compare_fla.tune_case("gdn", 4, 2048, 16, 128, args,
                                          backward)
                    for backward in (False, True)]
        self.assertEqual(best, ["C32 tv32 w4, 1.0 ms"] * 2)
        forward, backward = calls
        self.assertEqual(forward[1:], ["tune", "gdn", "--shape", "4,2048,16",
                                       "--dk", "128", "--dv", "128",
                                       "--dtype", "bf16", "--mode", "full"])
        self.assertEqual(backward, forward + ["--backward"])


@unittest.skipUnless(os.environ.get("LINA_BIN"), "LINA_BIN is not set")
class TuneWithoutGpuTest(unittest.TestCase):
    def test_tune_failure_names_the_cause(self):
        args = types.SimpleNamespace(dtype="bf16", tune="fast",
                                     tune_timeout_s=60)
        with tempfile.TemporaryDirectory() as cache:
            os.environ["LINA_CACHE_DIR"] = cache
            try:
                with self.assertRaises(RuntimeError) as cm:
                    compare_fla.tune_case("gdn", 2, 64, 2, 64, args)
            finally:
                del os.environ["LINA_CACHE_DIR"]
        message = str(cm.exception)
        self.assertIn("lina tune failed (exit 1)", message)
        self.assertIn("driver", message.lower())


class ReportTest(unittest.TestCase):
    def test_report_merges_runs_with_schedules(self):
        meta = {"date": "2026-11-29 18:00 UTC", "gpu": "NVIDIA H200",
                "peak_gbps": 4250.0, "peak_tflops": 700.0, "warmup": 25,
                "rep": 100, "tune": "fast"}
        with tempfile.TemporaryDirectory() as tmp:
            a, b, md = (Path(tmp) / n for n in ("a.json", "b.json", "t.md"))
            a.write_text(json.dumps({"meta": meta, "cases": [
                case("gdn", "B8_T1024_H8_D64", 0.59, 0.25,
                     lina_schedule="C32 tv16 w8 split")]}))
            b.write_text(json.dumps({"meta": meta, "cases": [
                case("kda", "varlen7", 1.2, 1.0),
                {"form": "dplr", "shape": "varlen7", "status": "NOT RUN",
                 "message": "time budget of 480 s would be exceeded"}]}))
            self.assertEqual(compare_fla.main(
                ["--report", str(a), str(b), "--markdown", str(md)]), 0)
            table = md.read_text()
        self.assertIn("tuned first (`lina tune --mode fast`)", table)
        self.assertIn("| gdn | B8_T1024_H8_D64 | ok | 4.90e-03 | 0.590 | 0.250 "
                      "| 2.36 |", table)
        self.assertIn("| C32 tv16 w8 split |", table)
        # A row without a recorded schedule (an older run) shows "-".
        self.assertRegex(table, r"\| kda \| varlen7 \| ok \|.*\| 1\.50 \| - \|")
        self.assertIn("- dplr/varlen7: NOT RUN: time budget", table)


if __name__ == "__main__":
    unittest.main()


class FakeProcess:
    """A subprocess.Popen stand-in: exits with `code`, or never (hangs)."""

    def __init__(self, code=0, err="", hangs=False):
        self.code, self.err, self.hangs = code, err, hangs
        self.returncode = None
        self.killed = False

    def communicate(self, timeout=None):
        if self.hangs and not self.killed:
            import subprocess
            raise subprocess.TimeoutExpired("fla", timeout)
        self.returncode = -9 if self.killed else self.code
        return "", self.err

    def kill(self):
        self.killed = True


class TrainWarmUpTest(unittest.TestCase):
    def test_a_process_per_form_keeping_no_autotuning_results(self):
        started = []
        outcomes = {"gla": FakeProcess(),
                    "kda": FakeProcess(1, "Traceback\nRuntimeError: boom"),
                    "dplr": FakeProcess(hangs=True)}

        def popen(cmd, env, **kw):
            started.append((cmd, env))
            return outcomes[cmd[cmd.index("--forms") + 1]]

        lines = train_fla.warm_fla(["gla", "kda", "dplr"],
                                   "B8_T1024_H8_D64", 5.0, popen=popen)
        self.assertEqual(len(started), 3)
        for cmd, env in started:
            self.assertIn("--fla-only", cmd)
            self.assertEqual(cmd[cmd.index("--shapes") + 1], "B8_T1024_H8_D64")
            # Timed under contention: nothing of it may be kept.
            self.assertEqual(env["FLA_CACHE_RESULTS"], "0")
            self.assertEqual(env["TRITON_CACHE_AUTOTUNING"], "0")
        self.assertEqual(lines, [
            "# fla warm-up gla: done",
            "# fla warm-up kda: failed (1): RuntimeError: boom",
            "# fla warm-up dplr: stopped after 5 s"])
        self.assertTrue(outcomes["dplr"].killed)

    def test_unknown_forms_shapes_and_negative_seconds_are_refused(self):
        for argv in (["--forms", "gdn,nope"], ["--shapes", "B1_T1_H1_D1"],
                     ["--warm-fla", "-1"]):
            with self.assertRaises(SystemExit), \
                    contextlib.redirect_stderr(io.StringIO()) as err:
                train_fla.main(argv)
            self.assertIn("error:", err.getvalue())

    def test_lina_only_needs_neither_fla_nor_einops(self):
        import builtins
        real_import = builtins.__import__

        def without_einops(name, *args, **kwargs):
            if name == "einops":
                raise ImportError("no einops here")
            return real_import(name, *args, **kwargs)

        saved_path, saved_env = list(sys.path), dict(os.environ)
        try:
            with mock.patch.object(builtins, "__import__", without_einops), \
                    mock.patch.object(compare_fla.glob, "glob",
                                      return_value=[]):
                compare_fla.setup_imports(need_fla=False)  # returns
                with self.assertRaises(SystemExit), \
                        contextlib.redirect_stdout(io.StringIO()):
                    compare_fla.setup_imports()
        finally:
            sys.path[:] = saved_path
            os.environ.clear()
            os.environ.update(saved_env)

    def test_lina_only_refuses_warming_fla(self):
        with self.assertRaises(SystemExit), \
                contextlib.redirect_stderr(io.StringIO()) as err:
            train_fla.main(["--lina-only", "--warm-fla", "10"])
        self.assertIn("--lina-only runs no fla: drop --warm-fla",
                      err.getvalue())
