"""Tests of lina.eager_extension's loading, without torch or a compiler
(stand-ins for torch.utils.cpp_extension):

    python3 -m unittest discover -s test/python -p test_eager_extension.py

The module must be built once per process at most, handed the address of
lina_decode_forward, and when it cannot be built (switched off, no torch,
a failing compile) the calls go on without it, with one warning that says
why. The module's own work is checked on the GPU
(test_eager_extension_gpu.py).
"""
from __future__ import annotations

import contextlib
import ctypes
import io
import sys
import types
import unittest
import warnings
import tempfile
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from lina import _capi, eager_extension  # noqa: E402

_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 0)


class StandInModule:
    __file__ = "/cache/lina_eager_decode.so"

    def __init__(self):
        self.launcher = None

    def set_launcher(self, address):
        self.launcher = address


class LoadTest(unittest.TestCase):
    def setUp(self):
        eager_extension.forget()
        self.builds = []
        self.module = StandInModule()
        self.build_error = None
        self.addCleanup(eager_extension.forget)
        self.root = tempfile.mkdtemp()
        patches = [
            mock.patch.dict("os.environ", {"TORCH_EXTENSIONS_DIR": self.root}),
            mock.patch.dict(sys.modules, self.stand_in_torch()),
            mock.patch.object(_capi, "library", lambda: types.SimpleNamespace(
                lina_decode_forward=_LAUNCH)),
        ]
        for p in patches:
            p.start()
            self.addCleanup(p.stop)

    def stand_in_torch(self) -> dict:
        torch = types.ModuleType("torch")
        torch.__version__ = "9.9.9"
        utils = types.ModuleType("torch.utils")
        cpp_extension = types.ModuleType("torch.utils.cpp_extension")

        def load(**kwargs):
            self.builds.append(kwargs)
            if self.build_error is not None:
                raise self.build_error
            return self.module

        cpp_extension.load = load
        cpp_extension.get_default_build_root = lambda: "/nowhere"
        torch.utils, utils.cpp_extension = utils, cpp_extension
        return {"torch": torch, "torch.utils": utils,
                "torch.utils.cpp_extension": cpp_extension}

    def test_the_module_is_built_once_and_given_the_launch_address(self):
        with contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertIs(eager_extension.load(), self.module)
            self.assertIs(eager_extension.load(), self.module)
        self.assertEqual(len(self.builds), 1)
        build = self.builds[0]
        self.assertEqual(build["name"], "lina_eager_decode")
        self.assertEqual(build["sources"], [str(eager_extension.SOURCE)])
        self.assertTrue(Path(build["sources"][0]).is_file())
        header = Path(build["extra_include_paths"][0]) / "lina" / "lina_c.h"
        self.assertTrue(header.is_file())
        self.assertEqual(self.module.launcher,
                         ctypes.cast(_LAUNCH, ctypes.c_void_p).value)
        # A folder of its own for each Python and torch version.
        python = f"py{sys.version_info.major}{sys.version_info.minor}"
        self.assertEqual(build["build_directory"], str(
            Path(self.root) / f"lina_eager_decode-{python}-torch9.9.9"))
        self.assertTrue(Path(build["build_directory"]).is_dir())
        # A build says so (it takes seconds) and how to skip it.
        self.assertIn("building the eager-call extension against torch 9.9.9",
                      err.getvalue())
        self.assertIn("LINA_EAGER_EXTENSION=0", err.getvalue())
        self.assertIsNone(eager_extension.failure())

    def test_a_local_torch_version_names_a_folder(self):
        torch = types.SimpleNamespace(__version__="2.11.0+cu130")
        builder = types.SimpleNamespace(get_default_build_root=lambda: "/r")
        with mock.patch.dict("os.environ", clear=True):
            folder = eager_extension.build_directory(torch, builder)
        self.assertEqual(folder.parent, Path("/r"))
        self.assertTrue(folder.name.endswith("-torch2.11.0_cu130"), folder)

    def test_switched_off_nothing_is_built(self):
        with mock.patch.dict("os.environ", {"LINA_EAGER_EXTENSION": "0"}):
            self.assertIsNone(eager_extension.load())
        self.assertEqual(self.builds, [])
        self.assertEqual(eager_extension.failure(), "LINA_EAGER_EXTENSION=0")

    def test_without_torch_there_is_no_module_and_no_warning(self):
        with mock.patch.dict(sys.modules, {"torch": None, "torch.utils": None,
                                           "torch.utils.cpp_extension": None}):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                self.assertIsNone(eager_extension.load())
        self.assertEqual(eager_extension.failure(), "torch is not installed")

    def test_a_failed_build_warns_once_with_the_compilers_error(self):
        self.build_error = RuntimeError(
            "Error building extension 'lina_eager_decode': [1/2] c++ -c x.cpp\n"
            "FAILED: eager_decode.o\n"
            "eager_decode.cpp:22:10: fatal error: ATen/core/Tensor.h: "
            "No such file or directory\n"
            "ninja: build stopped: subcommand failed.\n")
        with contextlib.redirect_stderr(io.StringIO()):
            with self.assertWarns(RuntimeWarning) as cm:
                self.assertIsNone(eager_extension.load())
            message = str(cm.warning)
            self.assertIn("fatal error: ATen/core/Tensor.h", message)
            self.assertIn("Python path", message)
            self.assertIn("LINA_EAGER_EXTENSION=0", message)
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # not again, not rebuilt
                self.assertIsNone(eager_extension.load())
        self.assertEqual(len(self.builds), 1)
        self.assertIn("fatal error", eager_extension.failure())

    def test_a_missing_library_is_a_failure_too(self):
        def missing():
            raise _capi.LinaError("liblina.so not found (tried: /x)")

        with mock.patch.object(_capi, "library", missing), \
                contextlib.redirect_stderr(io.StringIO()):
            with self.assertWarnsRegex(RuntimeWarning, "liblina.so not found"):
                self.assertIsNone(eager_extension.load())

    def test_the_command_line_says_why_there_is_no_module(self):
        with mock.patch.dict("os.environ", {"LINA_EAGER_EXTENSION": "0"}), \
                contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(eager_extension.main(), 1)
        self.assertIn("no eager-call extension: LINA_EAGER_EXTENSION=0",
                      err.getvalue())
        eager_extension.forget()
        with contextlib.redirect_stderr(io.StringIO()), \
                contextlib.redirect_stdout(io.StringIO()) as out:
            self.assertEqual(eager_extension.main(), 0)
        self.assertIn("ready: /cache/lina_eager_decode.so", out.getvalue())


if __name__ == "__main__":
    unittest.main()
