"""The C++ half of lina.fast_calls, built against the torch it runs with.

An eager decode call that an earlier call has checked costs about 20 us of
host time through Python and ctypes (docs/decode.md). ``csrc/eager_decode.cpp``
replays such calls from the tensors' C++ objects instead: the key, the
outputs' allocation and the launch in a few microseconds.

A compiled module must match the torch and Python it is loaded into, which
a wheel that serves every Python 3 cannot know, so it is built the first
time it is needed, with ``torch.utils.cpp_extension.load`` (a C++17
compiler and ninja; no CUDA toolkit), into a folder of torch's extension
directory for that Python and torch version, where later processes find
it. Build it ahead of time (a container image,
a server's start) with

    python3 -m lina.eager_extension

Set ``LINA_EAGER_EXTENSION=0`` to never build or load it. When it cannot be
built, lina warns once and the calls take the Python path; nothing else
changes.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
import warnings
from pathlib import Path

from . import _capi

ENV = "LINA_EAGER_EXTENSION"
NAME = "lina_eager_decode"
SOURCE = Path(__file__).resolve().parent / "csrc" / "eager_decode.cpp"

_lock = threading.Lock()
_tried = False
_module = None
_failure: str | None = None


def include_dirs() -> list[str]:
    """Where lina/lina_c.h is: installed with the package, or the source
    tree's api/include."""
    here = Path(__file__).resolve().parent
    for directory in (here / "_include", here.parent.parent / "api" / "include"):
        if (directory / "lina" / "lina_c.h").is_file():
            return [str(directory)]
    return []


def disabled() -> bool:
    return os.environ.get(ENV, "1").strip() == "0"


def failure() -> str | None:
    """Why the module is not loaded (None while it is, or before a try)."""
    return _failure


def build_directory(torch, cpp_extension) -> Path:
    """Where the module is built: torch's extension directory, one folder
    for each Python and torch version (a module built against one torch
    is never loaded into another)."""
    root = (os.environ.get("TORCH_EXTENSIONS_DIR")
            or cpp_extension.get_default_build_root())
    version = "".join(c if c.isalnum() or c in "._" else "_"
                      for c in torch.__version__)
    return (Path(root) / f"{NAME}-py{sys.version_info.major}"
            f"{sys.version_info.minor}-torch{version}")


def _build(quiet: bool):
    import torch
    from torch.utils import cpp_extension
    headers = include_dirs()
    if not headers:
        raise RuntimeError("lina/lina_c.h is not installed with the package")
    directory = build_directory(torch, cpp_extension)
    directory.mkdir(parents=True, exist_ok=True)
    fresh = not (directory / f"{NAME}.so").exists()
    if fresh and not quiet:
        print(f"lina: building the eager-call extension against torch "
              f"{torch.__version__} (once; about 30 s; {ENV}=0 skips it)",
              file=sys.stderr, flush=True)
    module = cpp_extension.load(
        name=NAME, sources=[str(SOURCE)], extra_include_paths=headers,
        extra_cflags=["-O2"], build_directory=str(directory), verbose=False)
    launcher = _capi.library().lina_decode_forward
    module.set_launcher(ctypes.cast(launcher, ctypes.c_void_p).value)
    return module


def _first_error(text: str) -> str:
    """The line of a build's output that says what went wrong: the
    compiler's first error, else the message's first line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if "error:" in line:
            return line
    return lines[0] if lines else "no message"


def load(quiet: bool = False):
    """The extension module, or None: turned off, no torch, or it could not
    be built (a warning says why, once). Tried once per process."""
    global _tried, _module, _failure
    if _tried:
        return _module
    with _lock:
        if _tried:
            return _module
        try:
            if disabled():
                _failure = f"{ENV}=0"
            else:
                try:
                    import torch.utils.cpp_extension  # noqa: F401
                except ImportError:
                    _failure = "torch is not installed"
                else:
                    _module = _build(quiet)
                    _failure = None
        except Exception as e:  # a compiler, ninja or header missing
            _module = None
            _failure = f"{type(e).__name__}: {_first_error(str(e))}"
            warnings.warn(
                f"lina: the eager-call extension could not be built "
                f"({_failure[:300]}); remembered decode calls take the "
                f"Python path (about 20 us of host time a call instead of "
                f"a few). Set {ENV}=0 to stop trying.",
                RuntimeWarning, stacklevel=3)
        _tried = True
        return _module


def forget() -> None:
    """Tries again at the next load (tests)."""
    global _tried, _module, _failure
    with _lock:
        _tried, _module, _failure = False, None, None


def main() -> int:
    module = load()
    if module is None:
        print(f"lina: no eager-call extension: {failure()}", file=sys.stderr)
        return 1
    print(f"lina: eager-call extension ready: {module.__file__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
