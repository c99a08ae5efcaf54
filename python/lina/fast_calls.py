"""Eager decode calls without the checks an earlier call has passed.

A serving engine calls a decode function for every layer and step with
tensors of the same shapes, and in eager mode the Python checks cost more
host time than the kernel takes at small batches. They read only what a
call's key holds: each tensor argument's shape, strides, dtype, device and
whether it requires grad, and the value of every other argument, with torch's
grad mode. A call whose key an earlier call had passes them as that call did,
so it launches that call's kernel (lina.decode.Launch) with its own tensors in
the same places and fresh outputs. Pointers are never part of the key: the C
API checks their alignment on every launch, as it does for a checked call.

A call is remembered only when everything it launched with is one of its
arguments (each a tensor of its own) or an output the launch allocated: a
call that passed one tensor twice, or that converted or made a tensor (a
non-contiguous input, RetNet's fixed decay, a missing A_log), runs the
checks every time. Traced calls (torch.compile, fake tensors) and calls
sent through the lina:: ops never take this path.

The entries are kept twice: here, and in lina.eager_extension's C++ module
when it could be built, which replays a call from the tensors' C++ objects
(a few microseconds of host time against about 20 through Python). A call
the module cannot replay comes here.
"""
from __future__ import annotations

import functools
import itertools
import warnings

from . import decode, eager_extension, torch_ops

try:
    import torch
    TENSOR = torch.Tensor
except ImportError:  # the checks run without torch; nothing is cached
    torch = None
    TENSOR = None

# Keys kept at once; the cache starts over past this (a server has few).
MAX_ENTRIES = 256


class _Uncacheable(Exception):
    pass


def _meta(x):
    if x is None:
        return None
    kind = type(x)
    if kind is TENSOR:
        device = x.get_device()
        if device < 0:  # host tensors are read by value by some checks
            raise _Uncacheable
        return (x.shape, x.stride(), x.dtype, device, x.requires_grad)
    if kind in (bool, int, float, str):
        return (kind, x)
    raise _Uncacheable


def _key(fn, args, kwargs):
    try:
        return (fn, _grad_enabled(), tuple(_meta(a) for a in args),
                tuple((k, _meta(v)) for k, v in kwargs.items()))
    except (_Uncacheable, RuntimeError):  # RuntimeError: a sparse tensor's
        return None                        # strides; the checks name it


def _grad_enabled() -> bool:
    return torch.is_grad_enabled()


def _traced() -> bool:
    return torch_ops.compiling()


class _Entry:
    """A remembered call: its launch, and where each pointer's tensor comes
    from in a call of the same key (an argument's position, "allocated", or
    None for NULL)."""

    def __init__(self, launch, sources):
        self.launch = launch
        self.sources = sources

    def replay(self, values):
        allocated = self.launch.allocated
        pointers = {}
        for field, source in self.sources.items():
            if source is None:
                pointers[field] = None
            elif source == "allocated":
                shape, dtype = allocated[field]
                pointers[field] = decode.empty(shape, dtype,
                                               self.launch.device)
            else:
                pointers[field] = values[source]
        return self.launch.run(pointers)


def _entry(launch, values, result):
    """The entry for a call that made ``launch`` from arguments ``values``
    and returned ``result``, or None when it cannot be replayed."""
    by_id = {}
    for i, v in enumerate(values):
        if type(v) is TENSOR:
            if id(v) in by_id:
                return None  # one tensor in two places: which one is which?
            by_id[id(v)] = i
    sources = {}
    for field, t in launch.pointers.items():
        if t is None:
            sources[field] = None
        elif field in launch.allocated:
            sources[field] = "allocated"
        elif id(t) in by_id:
            sources[field] = by_id[id(t)]
        else:
            return None  # made or converted by the call
    expected = launch.results(launch.pointers)
    if len(result) != len(expected) or any(
            r is not e for r, e in zip(result, expected)):
        return None
    # Without the call's tensors: an entry must not keep a freed pool alive.
    kept = decode.Launch(launch.kernel, launch.device, {}, launch.counts,
                         launch.allocated, launch.returns)
    return _Entry(kept, sources)


_entries: dict = {}
_function_numbers = itertools.count()
# The C++ module once a call has been remembered (None: not built), and
# whether it refused an entry (then it is not asked again).
_native = None
_native_refused = False


def clear() -> None:
    """Forgets every remembered call."""
    _entries.clear()
    if _native is not None:
        _native.clear()


def _native_launch(launch, sources) -> tuple:
    """What the C++ module keeps of an entry (see eager_decode.cpp)."""
    allocated = [(field, tuple(shape), decode.torch_dtype(dtype))
                 for field, (shape, dtype) in launch.allocated.items()]
    return (launch.kernel, int(launch.kernel._handle), launch.device.index,
            list(sources.items()), list(launch.counts.items()), allocated,
            tuple(launch.returns))


def _remember_natively(number, args, kwargs, entry) -> None:
    global _native, _native_refused
    if _native_refused:
        return
    if _native is None:
        _native = eager_extension.load()
        if _native is None:
            return
    try:
        _native.remember(number, args, kwargs,
                         _native_launch(entry.launch, entry.sources))
    except Exception as e:  # a mismatch with the module: lina's bug
        warnings.warn(f"lina: the eager-call extension refused an entry "
                      f"({e}); calls take the Python path", RuntimeWarning)
        _native, _native_refused = None, True


def remembered(fn):
    """Wraps a decode function so that a call with the key of an earlier
    successful call replays that call's launch (see the module's doc)."""
    number = next(_function_numbers)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if TENSOR is None or torch_ops.EAGER_THROUGH_OPS or _traced():
            return fn(*args, **kwargs)
        if _native is not None:
            result = _native.replay(number, args, kwargs)
            if result is not None:
                return result
        key = _key(fn, args, kwargs)
        if key is None:
            return fn(*args, **kwargs)
        values = args + tuple(kwargs.values())
        entry = _entries.get(key)
        if entry is not None:
            return entry.replay(values)
        outer = getattr(decode.recording, "launches", None)
        decode.recording.launches = launches = []
        try:
            result = fn(*args, **kwargs)
        finally:
            decode.recording.launches = outer
        if outer is not None:
            outer.extend(launches)
        if len(launches) == 1 and isinstance(result, tuple):
            entry = _entry(launches[0], values, result)
            if entry is not None:
                if len(_entries) >= MAX_ENTRIES:
                    _entries.clear()
                _entries[key] = entry
                if not eager_extension.disabled():
                    _remember_natively(number, args, kwargs, entry)
        return result

    return call
