"""ctypes declarations of lina's C API (api/include/lina/lina_c.h) and the
loading of liblina.so.

The library is loaded on first use, never at import time, so that
``import lina`` works (and its argument checks can be used and tested) on a
machine without the library. A missing library is a ``LinaError`` that names
every path that was tried.
"""
from __future__ import annotations

import ctypes
import enum
import os
import threading
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent          # python/lina
_REPO_DIR = _PACKAGE_DIR.parent.parent                  # the repository root

LIBRARY_ENV = "LINA_LIBRARY"


class Status(enum.IntEnum):
    """``lina_status``."""
    OK = 0
    INVALID_ARGUMENT = 1
    NO_DRIVER = 2
    DRIVER_ERROR = 3
    NO_COMPILER = 4
    COMPILE_ERROR = 5
    INTERNAL_ERROR = 6


class LinaError(RuntimeError):
    """A failure reported by liblina (``status`` is a ``Status``), or the
    library could not be loaded (``status`` is None)."""

    def __init__(self, message: str, status: Status | None = None):
        super().__init__(message)
        self.message = message
        self.status = status


class Strategy(enum.IntEnum):
    """``lina_strategy``."""
    DEFAULT = 0
    FUSED = 1
    MATERIALIZE = 2
    SPLIT = 3


class Prefetch(enum.IntEnum):
    """``lina_prefetch``."""
    DEFAULT = 0
    OFF = 1
    ON = 2


class Mma(enum.IntEnum):
    """``lina_mma``."""
    DEFAULT = 0
    WARP = 1
    WARPGROUP = 2


class Schedule(ctypes.Structure):
    """``lina_schedule``; zero means "choose for me"."""
    _fields_ = [
        ("chunk_size", ctypes.c_int64),
        ("tile_v", ctypes.c_int64),
        ("warps", ctypes.c_int64),
        ("strategy", ctypes.c_int),
        ("prefetch", ctypes.c_int),
        ("segments", ctypes.c_int64),
        ("mma", ctypes.c_int),
    ]


# The inputs and output that lina_forward_args and lina_decode_args both
# start with, in the same order.
_INPUT_FIELDS = [
    ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
    ("g", ctypes.c_void_p), ("beta", ctypes.c_void_p),
    ("a", ctypes.c_void_p), ("b", ctypes.c_void_p),
    ("gate_a_log", ctypes.c_void_p), ("gate_dt_bias", ctypes.c_void_p),
    ("o", ctypes.c_void_p),
]


class ForwardArgs(ctypes.Structure):
    """``lina_forward_args``: device pointers as integers (0 is NULL)."""
    _fields_ = _INPUT_FIELDS + [
        ("initial_state", ctypes.c_void_p), ("final_state", ctypes.c_void_p),
        ("cu_seqlens", ctypes.c_void_p),
        ("batch", ctypes.c_int64), ("seq_len", ctypes.c_int64),
        ("num_sequences", ctypes.c_int64),
        ("stream", ctypes.c_void_p),
    ]


class BackwardArgs(ctypes.Structure):
    """``lina_backward_args``: the forward call's inputs (its o and
    final_state NULL), dL/do and dL/d(final state), and the fp32 gradient
    buffers, one where each input is given."""
    _fields_ = [("forward", ForwardArgs),
                ("d_o", ctypes.c_void_p), ("d_final_state", ctypes.c_void_p)] + [
        (name, ctypes.c_void_p) for name in (
            "dq", "dk", "dv", "dg", "dbeta", "da", "db", "d_gate_a_log",
            "d_gate_dt_bias", "d_initial_state")]


class TuneMode(enum.IntEnum):
    """``lina_tune_mode``."""
    FAST = 0
    FULL = 1
    # Or'ed into FAST or FULL: tune the backward's kernels.
    BACKWARD = 16


class TuneResult(ctypes.Structure):
    """``lina_tune_result``."""
    _fields_ = [
        ("schedule", Schedule),
        ("time_ms", ctypes.c_double),
        ("candidates", ctypes.c_int64),
        ("pruned", ctypes.c_int64),
        ("tried", ctypes.c_int64),
        ("recorded", ctypes.c_int64),
        ("saved", ctypes.c_int),
        ("not_saved_reason", ctypes.c_char * 512),
    ]


class DecodeSchedule(ctypes.Structure):
    """``lina_decode_schedule``; zero means "choose for me"."""
    _fields_ = [("warp_columns", ctypes.c_int64), ("warps", ctypes.c_int64)]


class DecodeArgs(ctypes.Structure):
    """``lina_decode_args``: device pointers as integers (0 is NULL)."""
    _fields_ = _INPUT_FIELDS + [
        ("state", ctypes.c_void_p), ("state_indices", ctypes.c_void_p),
        ("num_accepted_tokens", ctypes.c_void_p),
        ("num_slots", ctypes.c_int64), ("indices_per_token", ctypes.c_int64),
        ("initial_state", ctypes.c_void_p), ("final_state", ctypes.c_void_p),
        ("batch", ctypes.c_int64), ("seq_len", ctypes.c_int64),
        ("stream", ctypes.c_void_p),
        ("cu_seqlens", ctypes.c_void_p), ("cu_seqlens_int64", ctypes.c_int64),
        ("state_v_first", ctypes.c_int64),
        ("intermediate_states", ctypes.c_void_p),
        ("intermediate_indices", ctypes.c_void_p),
        ("num_intermediate", ctypes.c_int64),
        ("intermediate_steps", ctypes.c_int64),
        ("disable_state_update", ctypes.c_int64),
    ]


def candidate_paths() -> list[Path]:
    """Where liblina.so is looked for, in order. ``$LINA_LIBRARY``, when set,
    is the only candidate (an explicit choice is never silently replaced)."""
    explicit = os.environ.get(LIBRARY_ENV)
    if explicit:
        return [Path(explicit)]
    return [
        _PACKAGE_DIR / "_lib" / "liblina.so",
        _REPO_DIR / "build" / "lib" / "liblina.so",
        _REPO_DIR / "dist" / "lib" / "liblina.so",
    ]


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    c_int64, c_char_p, c_void_p = ctypes.c_int64, ctypes.c_char_p, ctypes.c_void_p
    signatures = {
        "lina_last_error": ([], c_char_p),
        "lina_status_name": ([ctypes.c_int], c_char_p),
        "lina_version": ([], c_char_p),
        "lina_kernel_create": ([c_char_p, ctypes.POINTER(Schedule), ctypes.c_int,
                                ctypes.POINTER(c_void_p)], ctypes.c_int),
        "lina_kernel_create_for_shape": ([c_char_p, ctypes.POINTER(Schedule),
                                          c_int64, c_int64, ctypes.c_int,
                                          ctypes.POINTER(c_void_p)],
                                         ctypes.c_int),
        "lina_shape_bucket": ([c_int64, c_int64, c_int64, c_char_p,
                               ctypes.c_size_t], ctypes.c_int),
        "lina_kernel_schedule": ([c_void_p, ctypes.POINTER(Schedule)],
                                 ctypes.c_int),
        # The string comes back as a raw pointer so that it can be freed.
        "lina_preset_spec": ([c_char_p, c_int64, c_int64, c_int64, c_int64,
                              c_char_p, ctypes.POINTER(c_void_p)], ctypes.c_int),
        "lina_free_string": ([c_void_p], None),
        "lina_kernel_forward": ([c_void_p, ctypes.POINTER(ForwardArgs)],
                                ctypes.c_int),
        "lina_kernel_workspace_size": ([c_void_p, c_int64, c_int64, c_int64,
                                        ctypes.POINTER(ctypes.c_size_t)],
                                       ctypes.c_int),
        "lina_kernel_forward_with_workspace": ([c_void_p,
                                                ctypes.POINTER(ForwardArgs),
                                                c_void_p, ctypes.c_size_t],
                                               ctypes.c_int),
        "lina_kernel_destroy": ([c_void_p], None),
        "lina_tune": ([c_char_p, c_int64, c_int64, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.POINTER(TuneResult)],
                      ctypes.c_int),
        "lina_decode_create": ([c_char_p, ctypes.POINTER(DecodeSchedule),
                                ctypes.c_int, ctypes.POINTER(c_void_p)],
                               ctypes.c_int),
        "lina_decode_forward": ([c_void_p, ctypes.POINTER(DecodeArgs)],
                                ctypes.c_int),
        "lina_decode_warp_columns": ([c_void_p, c_int64], c_int64),
        "lina_decode_destroy": ([c_void_p], None),
        "lina_backward_create": ([c_char_p, ctypes.POINTER(Schedule),
                                  ctypes.c_int, ctypes.POINTER(c_void_p)],
                                 ctypes.c_int),
        "lina_backward_create_for_shape": ([c_char_p,
                                            ctypes.POINTER(Schedule),
                                            c_int64, c_int64, ctypes.c_int,
                                            ctypes.POINTER(c_void_p)],
                                           ctypes.c_int),
        "lina_backward_schedule": ([c_void_p, ctypes.POINTER(Schedule)],
                                   ctypes.c_int),
        "lina_backward_run": ([c_void_p, ctypes.POINTER(BackwardArgs)],
                              ctypes.c_int),
        "lina_backward_workspace_size": ([c_void_p, c_int64, c_int64, c_int64,
                                          ctypes.POINTER(ctypes.c_size_t)],
                                         ctypes.c_int),
        "lina_backward_run_with_workspace": ([c_void_p,
                                              ctypes.POINTER(BackwardArgs),
                                              c_void_p, ctypes.c_size_t],
                                             ctypes.c_int),
        "lina_backward_destroy": ([c_void_p], None),
    }
    for name, (argtypes, restype) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = restype
    return lib


_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_lib_path: Path | None = None


def library() -> ctypes.CDLL:
    """The loaded liblina.so; raises ``LinaError`` naming the paths tried."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in candidate_paths():
            if not path.is_file():
                tried.append(f"  {path} (not found)")
                continue
            try:
                lib = _declare(ctypes.CDLL(str(path)))
            except (OSError, AttributeError) as e:
                tried.append(f"  {path} (could not be loaded: {e})")
                continue
            _lib, _lib_path = lib, path
            return lib
        how = (f"${LIBRARY_ENV} names it" if os.environ.get(LIBRARY_ENV) else
               f"set ${LIBRARY_ENV} to its path, or build it with "
               "`cmake --build build --target LinaShared`")
        raise LinaError("liblina.so was not found; tried:\n" + "\n".join(tried)
                        + f"\n({how})")


def library_path() -> Path:
    """The path liblina.so was loaded from (loads it if needed)."""
    library()
    assert _lib_path is not None
    return _lib_path


def last_error() -> str:
    return library().lina_last_error().decode("utf-8", "replace")


def check(status: int, what: str) -> None:
    """Raises ``LinaError`` with the C message unless ``status`` is LINA_OK."""
    if status == Status.OK:
        return
    try:
        code = Status(status)
    except ValueError:
        code = Status.INTERNAL_ERROR
    raise LinaError(f"{what}: {code.name}: {last_error()}", code)


def version() -> str:
    return library().lina_version().decode()


def preset_spec(preset: str, key_dim: int, value_dim: int, heads: int,
                value_heads: int, dtype: str) -> str:
    """``lina_preset_spec``: the preset's spec as MLIR text."""
    lib = library()
    out = ctypes.c_void_p()
    status = lib.lina_preset_spec(preset.encode(), key_dim, value_dim, heads,
                                  value_heads, dtype.encode(), ctypes.byref(out))
    check(status, f"lina_preset_spec({preset!r})")
    try:
        return ctypes.string_at(out.value).decode()
    finally:
        lib.lina_free_string(out)


def _create(function: str, spec_text: str, schedule, *shape_and_device
            ) -> int:
    """``lina_kernel_create[_for_shape]`` or ``lina_decode_create``: the
    handle as an int. ``shape_and_device`` is (device,) or (batch, seq_len,
    device), as the function takes them."""
    handle = ctypes.c_void_p()
    sched = ctypes.byref(schedule) if schedule is not None else None
    status = getattr(library(), function)(spec_text.encode(), sched,
                                          *shape_and_device,
                                          ctypes.byref(handle))
    check(status, function)
    return handle.value


def kernel_create(spec_text: str, schedule: Schedule | None,
                  device: int) -> int:
    """``lina_kernel_create``; returns the handle as an integer."""
    return _create("lina_kernel_create", spec_text, schedule, device)


def kernel_create_for_shape(spec_text: str, schedule: Schedule | None,
                            batch: int, seq_len: int, device: int) -> int:
    """``lina_kernel_create_for_shape``: knobs the schedule leaves at 0 come
    from ``lina tune``'s result for this shape bucket when the cache has
    one."""
    return _create("lina_kernel_create_for_shape", spec_text, schedule,
                   batch, seq_len, device)


def kernel_schedule(handle: int) -> Schedule:
    """``lina_kernel_schedule``: the schedule the kernel was built with."""
    out = Schedule()
    check(library().lina_kernel_schedule(handle, ctypes.byref(out)),
          "lina_kernel_schedule")
    return out


def shape_bucket(batch: int, seq_len: int, value_heads: int) -> str:
    """``lina_shape_bucket``: e.g. ``'bh=9..16,t=257..1024'``."""
    buf = ctypes.create_string_buffer(64)
    check(library().lina_shape_bucket(batch, seq_len, value_heads, buf,
                                      len(buf)), "lina_shape_bucket")
    return buf.value.decode()


def kernel_forward(handle: int, args: ForwardArgs) -> None:
    status = library().lina_kernel_forward(handle, ctypes.byref(args))
    check(status, "lina_kernel_forward")


def _workspace_size(function: str, handle: int, batch: int, seq_len: int,
                    num_sequences: int) -> int:
    out = ctypes.c_size_t()
    check(getattr(library(), function)(handle, batch, seq_len, num_sequences,
                                       ctypes.byref(out)), function)
    return out.value


def kernel_workspace_size(handle: int, batch: int, seq_len: int,
                          num_sequences: int) -> int:
    """``lina_kernel_workspace_size``: the bytes of workspace a forward call
    of this shape needs (0: none)."""
    return _workspace_size("lina_kernel_workspace_size", handle, batch,
                           seq_len, num_sequences)


def kernel_forward_with_workspace(handle: int, args: ForwardArgs,
                                  workspace: int | None, nbytes: int) -> None:
    """``lina_kernel_forward_with_workspace``: ``workspace`` is a device
    pointer (or None where the size is 0)."""
    status = library().lina_kernel_forward_with_workspace(
        handle, ctypes.byref(args), workspace, nbytes)
    check(status, "lina_kernel_forward_with_workspace")


def kernel_destroy(handle: int) -> None:
    if _lib is not None and handle:
        _lib.lina_kernel_destroy(handle)


def tune(spec_text: str, batch: int, seq_len: int, mode: TuneMode,
         device: int, simulate: bool) -> TuneResult:
    """``lina_tune``: blocks while the candidates are timed."""
    out = TuneResult()
    status = library().lina_tune(spec_text.encode(), batch, seq_len, int(mode),
                                 device, int(simulate), ctypes.byref(out))
    check(status, "lina_tune")
    return out


def decode_create(spec_text: str, schedule: DecodeSchedule | None,
                  device: int) -> int:
    """``lina_decode_create``; returns the handle as an integer."""
    return _create("lina_decode_create", spec_text, schedule, device)


def decode_forward(handle: int, args: DecodeArgs) -> None:
    status = library().lina_decode_forward(handle, ctypes.byref(args))
    check(status, "lina_decode_forward")


def decode_warp_columns(handle: int, batch: int) -> int:
    return library().lina_decode_warp_columns(handle, batch)


def decode_destroy(handle: int) -> None:
    if _lib is not None and handle:
        _lib.lina_decode_destroy(handle)


def backward_create(spec_text: str, schedule: Schedule | None,
                    device: int) -> int:
    """``lina_backward_create``: of ``schedule`` only chunk_size, tile_v and
    warps may be set. Returns the handle as an integer."""
    return _create("lina_backward_create", spec_text, schedule, device)


def backward_create_for_shape(spec_text: str, schedule: Schedule | None,
                              batch: int, seq_len: int, device: int) -> int:
    """``lina_backward_create_for_shape``: with no knob set, the backward
    schedule ``lina tune --backward`` found fastest for the shape's bucket,
    if cached, else the default."""
    return _create("lina_backward_create_for_shape", spec_text, schedule,
                   batch, seq_len, device)


def backward_schedule(handle: int) -> Schedule:
    """``lina_backward_schedule``: what the backward was built with."""
    out = Schedule()
    check(library().lina_backward_schedule(handle, ctypes.byref(out)),
          "lina_backward_schedule")
    return out


def backward_run(handle: int, args: BackwardArgs) -> None:
    status = library().lina_backward_run(handle, ctypes.byref(args))
    check(status, "lina_backward_run")


def backward_workspace_size(handle: int, batch: int, seq_len: int,
                            num_sequences: int) -> int:
    """``lina_backward_workspace_size``: the bytes of workspace a backward
    call of this shape needs."""
    return _workspace_size("lina_backward_workspace_size", handle, batch,
                           seq_len, num_sequences)


def backward_run_with_workspace(handle: int, args: BackwardArgs,
                                workspace: int | None, nbytes: int) -> None:
    """``lina_backward_run_with_workspace``."""
    status = library().lina_backward_run_with_workspace(
        handle, ctypes.byref(args), workspace, nbytes)
    check(status, "lina_backward_run_with_workspace")


def backward_destroy(handle: int) -> None:
    if _lib is not None and handle:
        _lib.lina_backward_destroy(handle)
