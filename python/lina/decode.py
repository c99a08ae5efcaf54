"""Decode kernels: the recurrent form for serving (docs/decode.md).

A call takes 1 to 16 new tokens per sequence, ``[B, T, ...]`` like the
chunk functions, and a state in one of two forms:

- fla's: ``initial_state`` ``[B, HV, K, V]`` (or None: zero) and, with
  ``output_final_state``, a new ``final_state``;
- the pool (vLLM's and fla's continuous batching): ``initial_state`` is a
  pool ``[num_slots, HV, K, V]`` float32 updated in place, and
  ``ssm_state_indices`` int32 ``[B]`` says which slot each sequence uses, or
  ``[B, T]`` which slot keeps the state after each token (speculative
  decoding; ``num_accepted_tokens`` int32 ``[B]`` then picks the slot each
  sequence starts from). A negative index means no slot: start from zero and
  keep nothing.

Serving engines' layouts (packed tokens with ``cu_seqlens``, ``[V, K]``
states, intermediate states) are checked in ``lina.decode_layouts``.

Nothing here allocates or synchronises beyond the output tensor, so a call
can be captured in a CUDA graph (pass ``out`` to avoid even that).
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any

from . import _capi
from ._checks import Checker, _shape, check_output
from .kernel import KernelCache
from .spec import parse_spec_text

MAX_TOKENS = 16
WARP_COLUMNS = (4, 8, 16)


def make_decode_schedule(warp_columns=None, warps=None) -> tuple[int, int]:
    """(warp_columns, warps) with 0 for "choose for me"; ValueError for a
    bad knob (the planner checks what fits the spec)."""
    knobs = []
    for name, value, allowed in (("warp_columns", warp_columns, WARP_COLUMNS),
                                 ("warps", warps, range(1, 9))):
        if value is None or value == 0:
            knobs.append(0)
            continue
        if isinstance(value, bool) or not isinstance(value, int) or \
                value not in allowed:
            raise ValueError(f"decode schedule '{name}' must be one of "
                             f"{', '.join(str(a) for a in allowed)} (or None: "
                             f"choose for me), got {value!r}")
        knobs.append(value)
    return tuple(knobs)


class DecodeKernel:
    """One compiled decode kernel for one GPU (cached; see get_decode_kernel)."""

    def __init__(self, text: str, schedule: tuple, device: int):
        self.spec_text = text
        self.name, self.fields = parse_spec_text(text)
        self.schedule = dict(zip(("warp_columns", "warps"), schedule))
        self.device = device
        self._handle = 0
        self._handle = _capi.decode_create(
            text, _capi.DecodeSchedule(*schedule), device)

    def __del__(self):
        try:
            _capi.decode_destroy(self._handle)
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self):
        return (f"lina.DecodeKernel(@{self.name}, device={self.device}, "
                f"schedule={self.schedule})")

    def warp_columns(self, batch: int) -> int:
        """The value columns per warp a call with ``batch`` sequences uses."""
        return _capi.decode_warp_columns(self._handle, batch)


_cache = KernelCache(DecodeKernel)


def get_decode_kernel(text: str, schedule: tuple, device: int) -> DecodeKernel:
    """The cached decode kernel for (spec text, schedule, device)."""
    return _cache.get(text, schedule, device)


def check_tokens(where: str, q) -> None:
    T = int(q.shape[1])
    if not 1 <= T <= MAX_TOKENS:
        Checker(where).fail(
            f"decode takes 1 to {MAX_TOKENS} tokens per sequence, got T = {T} "
            "(q is [B, T, H, K]); run prompts through the chunk_* function "
            "with output_final_state=True and decode from that state")


class StateArgs:
    """The checked state arguments of one call."""

    def __init__(self):
        self.pool = None            # [S, HV, K, V] float32, updated in place
        self.indices = None         # int32 [B] or [B, T]
        self.accepted = None        # int32 [B]
        self.per_token = False
        self.initial = None         # fla form: [B, HV, K, V] float32
        self.inplace = False        # fla form: write the final state there


def check_state(where: str, fields, q, initial_state, ssm_state_indices,
                num_accepted_tokens, inplace_final_state,
                output_final_state, layout) -> StateArgs:
    """The state form of a call (see the module docstring) for the
    sequences and state order of ``layout`` (decode_layouts.Layout). The
    pool, the indices and an in-place initial state are written or read as
    they are, so they must already be contiguous and of the right dtype:
    nothing is copied behind the caller's back."""
    c = Checker(where)
    B = layout.batch
    HV, K, V = fields["value_heads"], fields["key_dim"], fields["value_dim"]
    dims, names = layout.state_dims(K, V)
    out = StateArgs()

    def exact(name, t, dtype, why):
        c.tensor(name, t)
        c.cuda(name, t, q.device)
        if str(t.dtype) != dtype:
            c.fail(f"'{name}' must be {dtype} {why}, got {t.dtype}")
        if not t.is_contiguous():
            c.fail(f"'{name}' must be contiguous ({why})")

    if ssm_state_indices is None:
        if num_accepted_tokens is not None:
            c.fail("'num_accepted_tokens' needs ssm_state_indices [B, T] "
                   "(a slot per token)")
        if initial_state is not None and inplace_final_state:
            exact("initial_state", initial_state, "torch.float32",
                  "(inplace_final_state=True writes the final state into it)")
            c.shape("initial_state", initial_state, f"N, HV, {names}",
                    [B, HV, *dims])
            out.inplace = True
        elif inplace_final_state and output_final_state:
            c.fail("inplace_final_state=True needs an initial_state to "
                   "write the final state into")
        elif initial_state is not None:
            c.tensor("initial_state", initial_state)
            c.cuda("initial_state", initial_state, q.device)
            c.floating("initial_state", initial_state)
            c.shape("initial_state", initial_state, f"N, HV, {names}",
                    [B, HV, *dims])
            # Read only: converted where it is, on the stream.
            initial_state = initial_state.float().contiguous()
        out.initial = initial_state
        return out

    if initial_state is None:
        c.fail("with ssm_state_indices, 'initial_state' is the state pool "
               "[num_slots, HV, K, V] (float32, updated in place); it is "
               "required")
    if inplace_final_state is False:
        c.fail("with ssm_state_indices the pool is updated in place: "
               "inplace_final_state=False is not supported")
    exact("initial_state", initial_state, "torch.float32",
          "(the state pool is updated in place)")
    shape = _shape(initial_state)
    if len(shape) != 4 or shape[1:] != [HV, *dims] or shape[0] < 1:
        c.fail(f"'initial_state' (the state pool) must have shape "
               f"[num_slots, HV, {names}] = [num_slots, {HV}, {dims[0]}, "
               f"{dims[1]}], got {shape}")
    exact("ssm_state_indices", ssm_state_indices, "torch.int32",
          "(convert once with .to(torch.int32))")
    idx = _shape(ssm_state_indices)
    if layout.tokens is None:
        # Packed: a row of S slots per sequence, S its most tokens.
        if not (idx == [B] or (len(idx) == 2 and idx[0] == B
                               and 1 <= idx[1] <= MAX_TOKENS)):
            c.fail(f"'ssm_state_indices' must have shape [N] = [{B}] (a slot "
                   f"per sequence) or [N, S] = [{B}, S], 1 <= S <= "
                   f"{MAX_TOKENS} (a slot per token, S >= each sequence's "
                   f"tokens), got {idx}")
    elif idx not in ([B], [B, layout.tokens]):
        c.fail(f"'ssm_state_indices' must have shape [B] = [{B}] (a slot per "
               f"sequence) or [B, T] = [{B}, {layout.tokens}] (a slot per "
               f"token), got {idx}")
    out.per_token = len(idx) == 2
    if num_accepted_tokens is not None:
        if not out.per_token:
            c.fail("'num_accepted_tokens' needs ssm_state_indices [B, T] "
                   "(a slot per token)")
        exact("num_accepted_tokens", num_accepted_tokens, "torch.int32",
              "(convert once with .to(torch.int32))")
        c.shape("num_accepted_tokens", num_accepted_tokens, "B", [B])
    if output_final_state:
        c.fail("with ssm_state_indices the states stay in the pool: "
               "output_final_state=True is not supported (read the pool)")
    out.pool = initial_state
    out.indices = ssm_state_indices
    out.accepted = num_accepted_tokens
    return out


def refuse_grad(where: str, tensors) -> None:
    """LinaError when one of ``tensors`` requires grad in grad mode: decode
    records no backward."""
    import torch
    if torch.is_grad_enabled() and any(getattr(t, "requires_grad", False)
                                       for t in tensors):
        raise _capi.LinaError(f"{where}: decoding has no backward pass (the "
                              "chunk_* functions have one); call it under "
                              "torch.no_grad() or pass detached tensors")


def _ptr(t) -> int | None:
    return None if t is None else t.data_ptr()


def _dim(t, i: int) -> int:
    return 0 if t is None else int(t.shape[i])


def _seq_len(state: StateArgs, layout) -> int:
    """lina_decode_args' seq_len: T, or packed the per-token slots' row
    width (any valid count otherwise: the kernel reads cu_seqlens)."""
    if layout.tokens is not None:
        return layout.tokens
    return int(state.indices.shape[1]) if state.per_token else MAX_TOKENS


class Launch:
    """One checked decode launch: the kernel, the tensors behind each pointer
    of ``lina_decode_args`` (None: NULL), its counts and flags, the outputs
    it allocated and what the call returns. ``run`` launches it on the
    current torch stream, with these tensors or, from lina.fast_calls,
    another call's in their places."""

    def __init__(self, kernel, device, pointers: dict, counts: dict,
                 allocated: dict, returns: tuple):
        self.kernel = kernel
        self.device = device
        self.pointers = pointers    # field -> tensor or None
        self.counts = counts        # field -> int
        self.allocated = allocated  # field -> (shape, dtype) made per call
        self.returns = returns      # field names (or None) of the results

    def run(self, pointers: dict):
        """Launches with ``pointers`` (field -> tensor or None) and returns
        the call's results."""
        args = _capi.DecodeArgs(
            **{f: _ptr(t) for f, t in pointers.items()}, **self.counts,
            stream=current_stream(self.device))
        with device_guard(self.device):
            _capi.decode_forward(self.kernel._handle, args)
        return self.results(pointers)

    def results(self, pointers: dict) -> tuple:
        """What a call launched with ``pointers`` returns."""
        return tuple(None if f is None else pointers[f] for f in self.returns)


# Where this thread's launches are recorded (lina.fast_calls): a list
# while a call is recorded, else absent.
recording = threading.local()


def torch_dtype(dtype):
    """``dtype``, a torch dtype or its name, as a torch dtype."""
    import torch
    return getattr(torch, dtype) if isinstance(dtype, str) else dtype


def empty(shape, dtype, device):
    """A new tensor; ``dtype`` a torch dtype or its name."""
    import torch
    return torch.empty(shape, dtype=torch_dtype(dtype), device=device)


def current_stream(device):
    """The raw handle of torch's current stream on ``device`` (None: the
    default stream)."""
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is None:
        return torch.cuda.current_stream(device).cuda_stream or None
    index = device.index
    return raw(torch.cuda.current_device() if index is None else index) or None


def device_guard(device):
    """``device`` made torch's current device for the launch (nothing to do
    when it is already)."""
    import torch
    if device.index is None or device.index == torch.cuda.current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(device)


def launch_decode(kernel: DecodeKernel, inp, state: StateArgs, where: str, *,
                  layout, output_final_state=False,
                  out=None) -> tuple[Any, Any]:
    """Allocates (or checks) the outputs and launches on the current torch
    stream. Returns (o, final_state): the pool in the pool form."""
    f = kernel.fields
    q = inp.q
    dev = q.device
    refuse_grad(where, (q, inp.k, inp.v, inp.g, inp.beta, inp.a, inp.b))
    HV, K, V = f["value_heads"], f["key_dim"], f["value_dim"]
    B = layout.batch
    o_shape = [inp.batch, inp.seq_len, HV, V]
    allocated = {}
    if out is None:
        allocated["o"] = (o_shape, q.dtype)
        out = empty(o_shape, q.dtype, dev)
    else:
        check_output(where, "out", out, o_shape, str(q.dtype), dev)
    final = None
    initial = state.initial
    if state.pool is None:
        if state.inplace:
            final = initial
        elif output_final_state:
            shape = [B, HV, *layout.state_dims(K, V)[0]]
            allocated["final_state"] = (shape, "float32")
            final = empty(shape, "float32", dev)
    pointers = dict(
        q=q, k=inp.k, v=inp.v, g=inp.g, beta=inp.beta, a=inp.a, b=inp.b,
        gate_a_log=inp.A_log, gate_dt_bias=inp.dt_bias, o=out,
        state=state.pool, state_indices=state.indices,
        num_accepted_tokens=state.accepted, initial_state=initial,
        final_state=final, cu_seqlens=layout.cu_seqlens,
        intermediate_states=layout.intermediate,
        intermediate_indices=layout.intermediate_indices)
    counts = dict(
        num_slots=int(state.pool.shape[0]) if state.pool is not None else 0,
        indices_per_token=int(state.per_token), batch=B,
        seq_len=_seq_len(state, layout),
        cu_seqlens_int64=int(layout.packed and
                             str(layout.cu_seqlens.dtype) == "torch.int64"),
        state_v_first=int(layout.v_first),
        num_intermediate=_dim(layout.intermediate, 0),
        intermediate_steps=_dim(layout.intermediate, 1),
        disable_state_update=int(layout.disable_state_update))
    returns = ("o", "state" if state.pool is not None else
               "final_state" if final is not None else None)
    launch = Launch(kernel, dev, pointers, counts, allocated, returns)
    results = launch.run(pointers)
    launches = getattr(recording, "launches", None)
    if launches is not None:
        launches.append(launch)
    return results
