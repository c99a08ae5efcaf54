"""Compiled kernels: ``lina.compile``, the kernel cache, and launching on a
torch stream."""
from __future__ import annotations

import functools
import threading
import warnings
from typing import Any

from . import _capi
from ._checks import Inputs, check_inputs, check_output
from .spec import FIELDS, field_value, parse_spec_text, spec_text
from .workspace import WorkspaceSizes, allocate

_STRATEGIES = {None: _capi.Strategy.DEFAULT, "default": _capi.Strategy.DEFAULT,
               "fused": _capi.Strategy.FUSED,
               "materialize": _capi.Strategy.MATERIALIZE,
               "split": _capi.Strategy.SPLIT}


_PREFETCH = {None: _capi.Prefetch.DEFAULT, False: _capi.Prefetch.OFF,
             True: _capi.Prefetch.ON}
_MMA = {None: _capi.Mma.DEFAULT, "warp": _capi.Mma.WARP,
        "warpgroup": _capi.Mma.WARPGROUP}


def mma_knob(mma=None, wgmma=None, stacklevel: int = 2) -> str | None:
    """The ``mma`` knob from ``mma`` and its deprecated spelling ``wgmma``
    (True: ``'warpgroup'``, False: ``'warp'``, with a DeprecationWarning
    for the frame ``stacklevel`` calls up, 1 being the caller's). Giving
    both is a TypeError; a bad value a ValueError naming the good ones."""
    if wgmma is not None:
        if mma is not None:
            raise TypeError("schedule: pass mma= alone (wgmma= is its "
                            "deprecated spelling)")
        if not isinstance(wgmma, bool):
            raise ValueError("schedule 'wgmma' must be True, False or None "
                             f"(choose for me), got {wgmma!r}")
        mma = "warpgroup" if wgmma else "warp"
        warnings.warn(f"wgmma= is deprecated; use mma={mma!r}",
                      DeprecationWarning, stacklevel=stacklevel + 1)
        return mma
    if not (mma is None or isinstance(mma, str)) or mma not in _MMA:
        raise ValueError("schedule 'mma' must be 'warp', 'warpgroup' or None "
                         f"(choose for me), got {mma!r}")
    return mma


def make_schedule(chunk_size=None, tile_v=None, warps=None, strategy=None,
                  prefetch=None, segments=None, mma=None, *, wgmma=None,
                  stacklevel: int = 2
                  ) -> tuple[int, int, int, str, bool | None, int, str | None]:
    """(chunk_size, tile_v, warps, strategy, prefetch, segments, mma) with
    0 / 'default' / None for "choose for me"; raises ValueError for a bad
    knob. ``mma`` is the matrix products the scan runs on: ``'warpgroup'``,
    Hopper's warpgroup products (their layout: chunk 64, fused, a warpgroup
    for each 64 value columns of a head, or of a 64-column tile of a d128
    head with ``tile_v=64, warps=4``; sm_90 only), or ``'warp'``, the
    warp-level mma.sync products. ``wgmma`` is its deprecated spelling
    (mma_knob; ``stacklevel`` counts from the caller's frame as there)."""
    mma = mma_knob(mma, wgmma, stacklevel + 1)
    knobs = []
    for name, value in (("chunk_size", chunk_size), ("tile_v", tile_v),
                        ("warps", warps), ("segments", segments)):
        if value is None:
            value = 0
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"schedule '{name}' must be a non-negative int "
                             f"(0 or None: choose for me), got {value!r}")
        knobs.append(value)
    if isinstance(strategy, _capi.Strategy):
        strategy = strategy.name.lower()
    if strategy not in _STRATEGIES:
        raise ValueError("schedule 'strategy' must be 'default', 'fused', "
                         f"'materialize' or 'split', got {strategy!r}")
    if prefetch is not None and not isinstance(prefetch, bool):
        raise ValueError("schedule 'prefetch' must be True, False or None "
                         f"(choose for me), got {prefetch!r}")
    return (*knobs[:3], strategy or "default", prefetch, knobs[3], mma)


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise _capi.LinaError("lina needs torch to run kernels (import torch "
                              f"failed: {e})") from e
    return torch


def device_index(device) -> int:
    """A CUDA ordinal from None (the current device), an int, a string or a
    torch.device."""
    if device is None:
        try:
            import torch
        except ImportError:
            return 0
        return torch.cuda.current_device() if torch.cuda.is_available() else 0
    if isinstance(device, int):
        return device
    torch = _torch()
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"lina runs on CUDA devices, got {device}")
    return torch.cuda.current_device() if device.index is None else device.index


def schedule_dict(s: _capi.Schedule) -> dict:
    """A ``lina_schedule`` with every knob set, as ``Kernel.schedule``
    spells it."""
    return {"chunk_size": s.chunk_size, "tile_v": s.tile_v, "warps": s.warps,
            "strategy": _capi.Strategy(s.strategy).name.lower(),
            "prefetch": s.prefetch == _capi.Prefetch.ON,
            "segments": s.segments,
            "mma": "warpgroup" if s.mma == _capi.Mma.WARPGROUP else "warp"}


class Kernel:
    """One compiled recurrence for one GPU; call it like the fla functions:
    ``o, final_state = kernel(q, k, v, g=..., beta=..., ...)``."""

    def __init__(self, text: str, schedule: tuple, device: int,
                 shape: tuple[int, int] | None = None):
        """``shape`` (batch, seq_len): knobs the schedule leaves open come
        from ``lina tune``'s result for that shape bucket, if cached."""
        self.spec_text = text
        self.name, self.fields = parse_spec_text(text)
        self.device = device
        self._handle = 0
        s = _capi.Schedule(schedule[0], schedule[1], schedule[2],
                           _STRATEGIES[schedule[3]], _PREFETCH[schedule[4]],
                           schedule[5], _MMA[schedule[6]])
        if shape is None:
            self._handle = _capi.kernel_create(text, s, device)
        else:
            self._handle = _capi.kernel_create_for_shape(text, s, *shape,
                                                         device)
        # What it was built with: the knobs asked for, and for the others
        # the tuned or default choice.
        self.schedule = schedule_dict(_capi.kernel_schedule(self._handle))
        # workspace_bytes(batch, seq_len, num_sequences): what a call of
        # that shape needs (lina_kernel_workspace_size; 0 for fused).
        self.workspace_bytes = WorkspaceSizes(_capi.kernel_workspace_size,
                                              self._handle)

    def __del__(self):
        try:
            _capi.kernel_destroy(self._handle)
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self):
        return (f"lina.Kernel(@{self.name}, device={self.device}, "
                f"schedule={self.schedule})")

    def __call__(self, q, k, v, g=None, beta=None, a=None, b=None, A_log=None,
                 dt_bias=None, initial_state=None, cu_seqlens=None, *,
                 cu_seqlens_cpu=None, o=None, final_state=None, stream=None):
        where = f"lina kernel @{self.name}"
        inputs = check_inputs(where, self.fields, q=q, k=k, v=v, g=g,
                              beta=beta, a=a, b=b, A_log=A_log, dt_bias=dt_bias,
                              initial_state=initial_state, cu_seqlens=cu_seqlens,
                              cu_seqlens_cpu=cu_seqlens_cpu)
        return launch(self, inputs, where, o=o, final_state=final_state,
                      stream=stream)


class KernelCache:
    """Kernels made by ``make(text, schedule, device, *args)``, each built
    once per ``(text, schedule, device, bucket)``."""

    def __init__(self, make):
        self._make = make
        self._kernels: dict[tuple, object] = {}
        self._lock = threading.Lock()

    def get(self, text: str, schedule: tuple, device: int, bucket=None,
            *args):
        key = (text, schedule, device, bucket)
        kernel = self._kernels.get(key)
        if kernel is None:
            with self._lock:
                kernel = self._kernels.get(key)
                if kernel is None:
                    kernel = self._kernels[key] = self._make(text, schedule,
                                                             device, *args)
        return kernel

    def clear(self) -> None:
        with self._lock:
            self._kernels.clear()

    def forget_buckets(self) -> None:
        """Drops the kernels built for a shape bucket (an open schedule), so
        that the next call of the bucket asks liblina again: a tune may have
        changed its schedule."""
        with self._lock:
            self._kernels = {key: kernel for key, kernel in self._kernels.items()
                             if key[3] is None}

    def kernels(self) -> list:
        with self._lock:
            return list(self._kernels.values())


_cache = KernelCache(Kernel)


# No knob set: the tuned or the shape's default schedule. Made by
# make_schedule itself, so that a knob added there cannot leave every call
# looking like a set schedule (that once built every kernel without its
# shape: the default for no shape).
_OPEN_SCHEDULE = make_schedule()
# A call's bucket without a trip through ctypes once its shape was seen.
_shape_bucket = functools.lru_cache(maxsize=4096)(_capi.shape_bucket)


def get_kernel(text: str, schedule: tuple, device: int,
               shape: tuple[int, int, int] | None = None) -> Kernel:
    """The cached kernel for (spec text, schedule, device). With ``shape``
    (batch, seq_len, value_heads) and no knob set, the kernel is the one
    ``lina tune`` chose for that shape's bucket (the default schedule when
    the cache holds no tuning result), built once per bucket."""
    if shape is None or schedule != _OPEN_SCHEDULE:
        return _cache.get(text, schedule, device)
    batch, seq_len, value_heads = shape
    bucket = _shape_bucket(batch, seq_len, value_heads)
    return _cache.get(text, schedule, device, bucket, (batch, seq_len))


def clear_cache() -> None:
    _cache.clear()


def forget_buckets() -> None:
    """Makes the next call of each shape bucket ask liblina for its kernel
    again (after a tune)."""
    _cache.forget_buckets()


def cached_kernels() -> list[Kernel]:
    """The chunk kernels this process has built, oldest first; each one's
    ``schedule`` says what it runs with (e.g. whether ``lina tune``'s result
    was found)."""
    return _cache.kernels()


def resolve_spec(where: str, spec, fields: dict, others: str) -> str:
    """The spec text of ``spec`` (MLIR text holding one ``lina.recurrence``,
    or a preset name, then with ``key_dim``, ``value_dim`` and ``heads`` from
    ``fields``) with ``fields`` set. Raises TypeError for an unknown keyword
    (the message lists the spec fields, then ``others``: the caller's own
    keywords) and ValueError for a missing dimension; a bad preset or value
    is liblina's ``LinaError``."""
    unknown = [f for f in fields if f not in FIELDS]
    if unknown:
        raise TypeError(f"{where}: unknown keyword '{unknown[0]}' (spec "
                        f"fields: {', '.join(FIELDS)}; {others})")
    if not isinstance(spec, str):
        raise TypeError(f"{where}: spec must be a str, got "
                        f"{type(spec).__name__}")
    if "lina.recurrence" in spec:
        name, base = parse_spec_text(spec)
    else:
        missing = [f for f in ("key_dim", "value_dim", "heads")
                   if fields.get(f) is None]
        if missing:
            raise ValueError(f"{where}({spec!r}): a preset needs "
                             f"{', '.join(missing)}")
        fields.setdefault("value_heads", fields["heads"])
        fields.setdefault("dtype", "bf16")
        name, base = parse_spec_text(_capi.preset_spec(
            spec, fields["key_dim"], fields["value_dim"], fields["heads"],
            fields["value_heads"], fields["dtype"]))
    base.update(fields)
    return spec_text(name, base)


def check_shape(where: str, batch, seq_len) -> None:
    """Raises ValueError unless ``batch`` and ``seq_len`` are ints >= 1."""
    for name, value in (("batch", batch), ("seq_len", seq_len)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{where}: '{name}' must be an int of at least "
                             f"1, got {value!r}")


def compile(spec, *, device=None, batch=None, seq_len=None, chunk_size=None,
            tile_v=None, warps=None, strategy=None, prefetch=None,
            segments=None, mma=None, wgmma=None, **fields) -> Kernel:
    """A kernel for ``spec``: MLIR text holding one ``lina.recurrence``, or a
    preset name (then ``key_dim``, ``value_dim`` and ``heads`` are required;
    ``value_heads`` defaults to ``heads`` and ``dtype`` to ``'bf16'``).
    Other keyword arguments set spec fields (docs/spec.md), e.g.
    ``varlen=True, initial_state=False``; the schedule knobs are
    ``chunk_size``, ``tile_v``, ``warps``, ``strategy``, ``prefetch``,
    ``segments`` and ``mma`` (``'warp'``, ``'warpgroup'`` or None;
    make_schedule; ``wgmma=True|False`` is its deprecated spelling).
    ``batch`` and ``seq_len`` (both or neither)
    are the shape the kernel will run at: with them and no knob set, the
    kernel has the schedule ``lina.tune`` (or ``lina tune``) recorded for
    that shape's bucket, else the shape's default."""
    schedule = make_schedule(chunk_size, tile_v, warps, strategy, prefetch,
                             segments, mma, wgmma=wgmma)
    text = resolve_spec("lina.compile", spec, fields,
                        "schedule: chunk_size, tile_v, warps, strategy, "
                        "prefetch, segments, mma; shape: batch, seq_len")
    if batch is None and seq_len is None:
        return get_kernel(text, schedule, device_index(device))
    check_shape("lina.compile", batch, seq_len)
    value_heads = parse_spec_text(text)[1]["value_heads"]
    return get_kernel(text, schedule, device_index(device),
                      (batch, seq_len, value_heads))


def _stream_handle(torch, stream, device) -> tuple[int, bool]:
    """(cudaStream_t as an int, whether it is not the current stream)."""
    current = torch.cuda.current_stream(device)
    if stream is None:
        return current.cuda_stream, False
    handle = stream if isinstance(stream, int) else stream.cuda_stream
    return handle, handle != current.cuda_stream


def _ptr(t) -> int | None:
    return None if t is None else t.data_ptr()


def launch(kernel: Kernel, inp: Inputs, where: str, *, o=None,
           final_state=None, stream=None) -> tuple[Any, Any]:
    """Allocates (or checks) the outputs and launches ``kernel`` on the stream
    (the current torch stream by default). Returns (o, final_state)."""
    torch = _torch()
    f = kernel.fields
    q = inp.q
    dev = q.device
    if dev.index is not None and dev.index != kernel.device:
        raise ValueError(f"{where}: q is on {dev} but the kernel was compiled "
                         f"for cuda:{kernel.device}")
    if torch.is_grad_enabled() and any(
            getattr(t, "requires_grad", False)
            for t in (q, inp.k, inp.v, inp.g, inp.beta, inp.a, inp.b,
                      inp.A_log, inp.dt_bias, inp.initial_state)):
        # The fla-named functions come here with grad mode off (inside
        # autograd.LinaFunction); a lina.Kernel called directly records no
        # backward.
        raise _capi.LinaError(f"{where}: a lina.Kernel call has no backward "
                              "pass; use the fla-named functions "
                              "(lina.chunk_*), which are differentiable, or "
                              "call it under torch.no_grad()")
    B, T, N = inp.batch, inp.seq_len, inp.num_sequences
    HV, K, V = f["value_heads"], f["key_dim"], f["value_dim"]
    o_shape = [B, T, HV, V]
    if o is None:
        o = torch.empty(o_shape, dtype=q.dtype, device=dev)
    else:
        check_output(where, "o", o, o_shape, str(q.dtype), dev)
    state_shape = [N, HV, K, V]
    if field_value(f, "final_state"):
        if final_state is None:
            final_state = torch.empty(state_shape, dtype=torch.float32,
                                      device=dev)
        else:
            check_output(where, "final_state", final_state, state_shape,
                         "torch.float32", dev)
    elif final_state is not None:
        raise ValueError(f"{where}: 'final_state' was given but the spec has "
                         "final_state = false")

    if q.numel() == 0:
        # Nothing to run: no tokens (or no sequences); the state passes through.
        if final_state is not None:
            if inp.initial_state is not None:
                final_state.copy_(inp.initial_state)
            else:
                final_state.zero_()
        return o, final_state

    cu = inp.cu_seqlens
    if cu is not None and cu.device.type == "cpu":
        cu = cu.to(dev)
    with torch.cuda.device(dev):
        handle, other_stream = _stream_handle(torch, stream, dev)
        # The call's own scratch from torch (workspace.py), allocated on the
        # stream that runs the call: ordered after that memory's last use
        # there, and a CUDA graph's while one is being captured.
        nbytes = kernel.workspace_bytes(B, T, N)
        tensors = (q, inp.k, inp.v, inp.g, inp.beta, inp.a, inp.b, inp.A_log,
                   inp.dt_bias, o, inp.initial_state, final_state, cu)
        if other_stream:
            # Memory made on the current stream must outlive the launch there.
            s = torch.cuda.ExternalStream(handle) if isinstance(stream, int) \
                else stream
            for t in tensors:
                if t is not None:
                    t.record_stream(s)
            with torch.cuda.stream(s):
                workspace = allocate(torch, nbytes, dev)
        else:
            workspace = allocate(torch, nbytes, dev)
        args = _capi.ForwardArgs(
            q=_ptr(q), k=_ptr(inp.k), v=_ptr(inp.v), g=_ptr(inp.g),
            beta=_ptr(inp.beta), a=_ptr(inp.a), b=_ptr(inp.b),
            gate_a_log=_ptr(inp.A_log), gate_dt_bias=_ptr(inp.dt_bias),
            o=_ptr(o), initial_state=_ptr(inp.initial_state),
            final_state=_ptr(final_state), cu_seqlens=_ptr(cu),
            batch=B, seq_len=T, num_sequences=N, stream=handle or None)
        _capi.kernel_forward_with_workspace(kernel._handle, args,
                                            _ptr(workspace), nbytes)
    return o, final_state
