"""Gradients of the fla-named functions (docs/training.md).

When a tensor of a call requires grad (and grad mode is on), the call's
backward runs the spec's backward kernels
(``lina_backward_run_with_workspace``, the gradients derived by the compiler
from the same spec) on the current torch stream, through
``launch_backward``, in a workspace from torch's caching allocator. With
torch's custom ops (torch_ops.py) that is the backward registered on the
op; otherwise ``ops`` runs the call through ``LinaFunction``, whose forward
is the ordinary forward call. Calls without such a tensor pay nothing.

The backward writes fp32 gradients for every input the call passed to
liblina, under the C API's names. What reaches each of the user's tensors
is decided here from the names the call used (``ops`` passes the user's own
tensors under lina's input names: fla's gk is g, g_gamma is g): a tensor
that lina made itself (RetNet's decay, KDA's A_log = 0) does not require
grad and gets None, and each gradient is cast to its tensor's dtype.

Nothing at import time needs torch or liblina.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from . import _capi
from .kernel import KernelCache, _ptr, _torch
from .kernel import _shape_bucket as shape_bucket
from .workspace import WorkspaceSizes, allocate

# lina's inputs that have a gradient, in the order the Function takes them,
# with the lina_backward_args field each one's gradient is written to.
GRADIENT_FIELDS = {
    "q": "dq", "k": "dk", "v": "dv", "g": "dg", "beta": "dbeta",
    "a": "da", "b": "db", "A_log": "d_gate_a_log",
    "dt_bias": "d_gate_dt_bias", "initial_state": "d_initial_state",
}

# The backward's schedule (chunk_size, tile_v, warps): no knob set, so a
# call's backward runs what ``lina.tune(..., backward=True)`` found for its
# shape bucket, else the default. The forward's knobs do not carry over: the
# two are planned and tuned separately (the backward keeps more on chip per
# chunk), and the gradients do not depend on the schedule.
BACKWARD_SCHEDULE = (0, 0, 0)


def wants_grad(tensors) -> bool:
    """Whether a call with ``tensors`` must record a backward: one of them
    requires grad and grad mode is on. torch is imported only when some
    tensor requires grad (so it is never needed otherwise)."""
    if not any(getattr(t, "requires_grad", False) for t in tensors):
        return False
    return _torch().is_grad_enabled()


def backward_buffers(inputs: dict) -> dict[str, list[int]]:
    """The fp32 gradient buffers a backward call needs, by input name, with
    their shapes: one for each input the forward call passed (``inputs``:
    name -> the checked tensor or None), as lina_backward_run requires each
    exactly where its input is given, whether or not the caller wants it."""
    return {name: [int(d) for d in inputs[name].shape]
            for name in GRADIENT_FIELDS if inputs.get(name) is not None}


def returned_gradients(names, needs, dtypes, grads: dict, cast) -> tuple:
    """What the Function's backward returns for its inputs ``names``:
    ``cast(grads[name], dtype)`` where ``needs`` (ctx.needs_input_grad) says
    the input wants one, else None. A wanted input that has no gradient
    (not an input lina differentiates) is a bug, not a silent zero."""
    out = []
    for name, need, dtype in zip(names, needs, dtypes):
        if not need:
            out.append(None)
            continue
        if name not in grads:
            raise AssertionError(f"lina backward: no gradient for '{name}'")
        out.append(cast(grads[name], dtype))
    return tuple(out)


class BackwardKernel:
    """One compiled backward (``lina_backward_create``) for one GPU."""

    def __init__(self, text: str, schedule: tuple, device: int,
                 shape: tuple[int, int] | None = None):
        """``shape`` (batch, seq_len): with no knob set, the schedule is
        ``lina tune --backward``'s for that shape bucket, if cached."""
        self.spec_text = text
        self.device = device
        self._handle = 0
        s = _capi.Schedule(schedule[0], schedule[1], schedule[2])
        if shape is None:
            self._handle = _capi.backward_create(text, s, device)
        else:
            self._handle = _capi.backward_create_for_shape(text, s, *shape,
                                                           device)
        # What it was built with: the knobs asked for, else the tuned or
        # default choice.
        built = _capi.backward_schedule(self._handle)
        self.schedule = {"chunk_size": built.chunk_size,
                         "tile_v": built.tile_v, "warps": built.warps}
        # workspace_bytes(batch, seq_len, num_sequences): what a call of
        # that shape needs (lina_backward_workspace_size).
        self.workspace_bytes = WorkspaceSizes(_capi.backward_workspace_size,
                                              self._handle)

    def __del__(self):
        try:
            _capi.backward_destroy(self._handle)
        except Exception:  # interpreter shutdown
            pass


_cache = KernelCache(BackwardKernel)


def get_backward_kernel(text: str, device: int,
                        schedule: tuple = BACKWARD_SCHEDULE,
                        shape: tuple[int, int, int] | None = None
                        ) -> BackwardKernel:
    """The cached backward for (spec text, schedule, device). With ``shape``
    (batch, seq_len, value_heads) and no knob set, the one ``lina tune
    --backward`` chose for that shape's bucket (the default schedule when
    the cache holds no result), built once per bucket."""
    if shape is None or schedule != BACKWARD_SCHEDULE:
        return _cache.get(text, schedule, device)
    batch, seq_len, value_heads = shape
    bucket = shape_bucket(batch, seq_len, value_heads)
    return _cache.get(text, schedule, device, bucket, (batch, seq_len))


def clear_cache() -> None:
    _cache.clear()


def forget_buckets() -> None:
    """Makes the next backward of each shape bucket ask liblina for its
    kernel again (after a backward tune)."""
    _cache.forget_buckets()


@dataclass
class Launched:
    """What a forward call leaves for its backward: the checked inputs (made
    contiguous, gates fp32, cu_seqlens int64), the spec text and device."""
    inputs: Any
    text: str
    device: int


@dataclass
class Call:
    """A forward call to differentiate. ``forward(tensors)`` (``tensors``:
    lina's input names -> the user's tensors) checks and launches it and
    returns ((o, final_state), Launched)."""
    where: str
    forward: Callable
    names: tuple


def run(where: str, forward: Callable, tensors: dict) -> tuple:
    """(o, final_state) of ``forward``, recorded for autograd."""
    call = Call(where, forward, tuple(tensors))
    return _function().apply(call, *tensors.values())


def launch_backward(launched: Launched, saved: dict, do, dht) -> dict:
    """Runs the backward of one call on the current stream, its chunk
    states in a workspace from torch's caching allocator (workspace.py);
    returns the fp32 gradients by input name (``backward_buffers``).
    ``saved``: the checked inputs by name, as the forward launched them;
    ``do``/``dht``: the gradients of o and of the final state, or None
    (zero)."""
    torch = _torch()
    q = saved["q"]
    dev = q.device
    grads = {name: torch.empty(shape, dtype=torch.float32, device=dev)
             for name, shape in backward_buffers(saved).items()}
    if q.numel() == 0:
        # The forward ran nothing and passed the state through.
        for name, t in grads.items():
            t.zero_()
        if "initial_state" in grads and dht is not None:
            grads["initial_state"].copy_(dht)
        return grads
    B, T, HV, V = (int(q.shape[0]), int(q.shape[1]), int(saved["v"].shape[2]),
                   int(saved["v"].shape[3]))
    if do is None:
        do = torch.zeros([B, T, HV, V], dtype=q.dtype, device=dev)
    else:
        do = do.to(q.dtype).contiguous()
    if dht is not None:
        dht = dht.float().contiguous()
    cu = saved["cu_seqlens"]
    if cu is not None and cu.device.type == "cpu":
        cu = cu.to(dev)
    inputs = launched.inputs
    # The bucket as the forward's kernel took it (ops.py): the number of
    # sequences and the longest where the lengths are on the host, else the
    # packed length.
    batch = (inputs.num_sequences if saved["cu_seqlens"] is not None
             else inputs.batch)
    length = inputs.longest or inputs.seq_len
    kernel = get_backward_kernel(launched.text, launched.device,
                                 shape=(batch, length, HV))
    with torch.cuda.device(dev):
        stream = torch.cuda.current_stream(dev).cuda_stream
        forward = _capi.ForwardArgs(
            q=_ptr(q), k=_ptr(saved["k"]), v=_ptr(saved["v"]),
            g=_ptr(saved["g"]), beta=_ptr(saved["beta"]), a=_ptr(saved["a"]),
            b=_ptr(saved["b"]), gate_a_log=_ptr(saved["A_log"]),
            gate_dt_bias=_ptr(saved["dt_bias"]), o=None,
            initial_state=_ptr(saved["initial_state"]), final_state=None,
            cu_seqlens=_ptr(cu), batch=inputs.batch, seq_len=inputs.seq_len,
            num_sequences=inputs.num_sequences, stream=stream or None)
        args = _capi.BackwardArgs(
            forward=forward, d_o=_ptr(do), d_final_state=_ptr(dht),
            **{GRADIENT_FIELDS[name]: _ptr(t) for name, t in grads.items()})
        nbytes = kernel.workspace_bytes(inputs.batch, inputs.seq_len,
                                        inputs.num_sequences)
        workspace = allocate(torch, nbytes, dev)
        _capi.backward_run_with_workspace(kernel._handle, args,
                                          _ptr(workspace), nbytes)
    return grads


# What the forward saves for the backward: the checked inputs.
SAVED = tuple(GRADIENT_FIELDS) + ("cu_seqlens",)

_function_class = None


def _function():
    """LinaFunction, defined on first use so that importing lina does not
    import torch."""
    global _function_class
    if _function_class is not None:
        return _function_class
    torch = _torch()
    from torch.autograd.function import once_differentiable

    class LinaFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, call: Call, *values):
            (o, final_state), launched = call.forward(
                dict(zip(call.names, values)))
            # An output the loss does not use has no gradient: None, not a
            # tensor of zeros made for nothing.
            ctx.set_materialize_grads(False)
            ctx.call, ctx.launched = call, launched
            ctx.dtypes = [getattr(t, "dtype", None) for t in values]
            ctx.save_for_backward(*(getattr(launched.inputs, name)
                                    for name in SAVED))
            return o, final_state

        @staticmethod
        @once_differentiable
        def backward(ctx, do, dht):
            saved = dict(zip(SAVED, ctx.saved_tensors))
            grads = launch_backward(ctx.launched, saved, do, dht)
            return (None,) + returned_gradients(
                ctx.call.names, ctx.needs_input_grad[1:], ctx.dtypes, grads,
                lambda t, dtype: t.to(dtype))

    _function_class = LinaFunction
    return LinaFunction
