"""The fla-named functions as ``torch.library`` custom ops (namespace
``lina``), so that ``torch.compile(fullgraph=True)`` traces a model that
calls them: one op per function, ``torch.ops.lina.chunk_kda``,
``torch.ops.lina.fused_recurrent_kda``, ..., each with a fake kernel (the
output shapes, for FakeTensorMode and the compiler) and the chunk ops with
autograd (their backward is one more op, ``lina::chunk_backward``).

The Python functions keep fla's signatures and do what is pure Python on
their own (keywords, flags, the schedule knobs); the op takes what is left
in lina's terms, all of torch.library's schema types, the same for every
chunk op (and for every decode op): the tensors by lina's input names, the
preset, the spec options the flags became, and the schedule. Its kernel
checks the tensors and launches (ops.chunk_forward,
decode_ops.decode_forward), so every check and message is the one the
function had before; the fake kernels check only what the shapes they
compute need (head_dims). A chunk op's workspace (and its backward's) is
allocated inside the kernel from torch's caching allocator (workspace.py)
and freed there: it is no argument or output of the op, so the schemas and
fake kernels have none.

Conventions:

- a chunk op returns ``(o, final_state)``; a final state not asked for is an
  empty float32 tensor (a schema cannot return an optional tensor), which
  the Python function turns into None;
- a decode op mutates ``initial_state`` (a state pool, or a state written
  in place), ``out`` and ``intermediate_states_buffer``, and never returns
  them (an op's outputs may not alias its inputs): o is empty when ``out``
  was given and the final state is empty unless fla's form asked for a new
  one; the Python function
  returns ``out``, the pool or the state itself there. ``initial_state`` is
  declared mutated in every form: the op cannot tell from the schema which
  form a call takes, and declaring one mutation too many costs a copy only
  under functionalization where the state was not written.

Registered on import when torch has ``torch.library.custom_op`` (2.4 and
later); without torch, or with an older one, the functions check and launch
directly, as the tests' stand-in tensors do.
"""
from __future__ import annotations

try:
    import torch
except ImportError:  # lina's checks work without torch
    torch = None

NAMESPACE = "lina"

CHUNK_OPS = ("chunk_simple_gla", "chunk_retention", "chunk_gla",
             "chunk_delta_rule", "chunk_gated_delta_rule", "chunk_kda",
             "chunk_dplr_delta_rule")
DECODE_OPS = ("fused_recurrent_gated_delta_rule", "fused_recurrent_kda",
              "fused_recurrent_delta_rule", "fused_recurrent_simple_gla",
              "fused_recurrent_gla", "fused_recurrent_retention",
              "fused_recurrent_dplr_delta_rule")
BACKWARD_OP = "chunk_backward"

# lina's inputs besides the state, in the C API's order; with the state,
# the inputs that have a gradient (autograd.GRADIENT_FIELDS' order).
INPUTS = ("q", "k", "v", "g", "beta", "a", "b", "A_log", "dt_bias")
DIFFERENTIABLE = INPUTS + ("initial_state",)

_TENSORS = ("Tensor q, Tensor k, Tensor v, Tensor? g, Tensor? beta, "
            "Tensor? a, Tensor? b, Tensor? A_log, Tensor? dt_bias")
# What the flags became (ops._run's options; None: the preset's default)
# and how the call is made.
_CALL = ("str preset, float? scale, bool output_final_state, "
         "bool? qk_l2norm, str? beta_kind, str? gate, "
         "float? gate_lower_bound, bool fill_A_log")
CHUNK_SCHEMA = (f"({_TENSORS}, Tensor? initial_state, Tensor? cu_seqlens, "
                f"Tensor? cu_seqlens_cpu, {_CALL}, int chunk_size, "
                "int tile_v, int warps, str strategy, bool? prefetch, "
                "int segments, str? mma) -> (Tensor, Tensor)")
BACKWARD_SCHEMA = (f"(str name, {_TENSORS}, Tensor? initial_state, "
                   "Tensor? cu_seqlens, Tensor? grad_o, "
                   f"Tensor? grad_final_state, {_CALL}) -> Tensor[]")
DECODE_SCHEMA = (f"({_TENSORS}, Tensor(a!)? initial_state, "
                 "Tensor? ssm_state_indices, Tensor? num_accepted_tokens, "
                 "Tensor(b!)? out, Tensor? cu_seqlens, "
                 "Tensor(c!)? intermediate_states_buffer, "
                 f"Tensor? intermediate_state_indices, {_CALL}, "
                 "bool? inplace_final_state, bool state_v_first, "
                 "bool disable_state_update, int warp_columns, int warps) "
                 "-> (Tensor, Tensor)")
DECODE_MUTATES = ("initial_state", "out", "intermediate_states_buffer")
# A decode call's state arguments (decode_ops._run's `state`): its tensors,
# then its flags.
DECODE_STATE_TENSORS = ("initial_state", "ssm_state_indices",
                        "num_accepted_tokens", "out", "cu_seqlens",
                        "intermediate_states_buffer",
                        "intermediate_state_indices")
DECODE_STATE_FLAGS = ("state_v_first", "disable_state_update")

# ops._run's option names -> the schema's.
_OPTIONS = {"qk_l2norm": "qk_l2norm", "beta": "beta_kind", "gate": "gate",
            "gate_lower_bound": "gate_lower_bound"}
_SCHEDULE = ("chunk_size", "tile_v", "warps", "strategy", "prefetch",
             "segments", "mma")


def arg_names(schema: str) -> tuple:
    """The argument names of a schema, in order."""
    inside = schema[schema.index("(") + 1:schema.index(") ->")]
    return tuple(arg.split()[-1] for arg in inside.split(", "))


CHUNK_ARGS = arg_names(CHUNK_SCHEMA)
BACKWARD_ARGS = arg_names(BACKWARD_SCHEMA)
DECODE_ARGS = arg_names(DECODE_SCHEMA)
_CALL_ARGS = arg_names(f"({_CALL}) ->")
# What a chunk op's backward needs of its tensors.
_SAVED = DIFFERENTIABLE + ("cu_seqlens",)

REGISTERED = False


# Eager calls on real tensors go through the ops too when True (the op
# tests on the CPU, which replace the launches; a caller who wants the
# dispatcher in every call). False: they launch directly.
EAGER_THROUGH_OPS = False


def dispatchable(*tensors) -> bool:
    """Whether a call goes through the op: the ops are registered, q (the
    first) is a torch.Tensor, every other tensor argument is one or None
    (anything else is named by the checks, as without torch), and the call
    is being traced: torch.compile, or tensors without data (fake or meta,
    as make_fx and the fake kernels' tests give). An eager call on real
    tensors keeps the direct launch: no dispatcher between the caller and
    the kernel (about 10 us of host time a call)."""
    if not REGISTERED or not isinstance(tensors[0], torch.Tensor):
        return False
    if not all(t is None or isinstance(t, torch.Tensor) for t in tensors):
        return False
    return EAGER_THROUGH_OPS or _traced(t for t in tensors if t is not None)


def compiling() -> bool:
    """Whether torch.compile is tracing the caller."""
    compiler = getattr(torch, "compiler", None)
    return compiler is not None and compiler.is_compiling()


def _traced(tensors) -> bool:
    if compiling():
        return True
    from torch._subclasses.fake_tensor import is_fake
    return any(t.device.type == "meta" or is_fake(t) for t in tensors)


def _options_args(options: dict) -> list:
    if set(options) - set(_OPTIONS):  # a new option needs a schema argument
        raise AssertionError(f"lina: no op argument for {sorted(options)}")
    return [options.get(name) for name in _OPTIONS]


def _call_args(preset, scale, output_final_state, options, fill_A_log):
    return [preset, None if scale is None else float(scale),
            bool(output_final_state), *_options_args(options),
            bool(fill_A_log)]


def _options(a: dict) -> dict:
    """The options dict back from an op's arguments."""
    return {name: a[arg] for name, arg in _OPTIONS.items()
            if a[arg] is not None}


def chunk_args(preset, tensors, cu_seqlens, cu_seqlens_cpu, scale,
               output_final_state, options, schedule, fill_A_log) -> tuple:
    """A chunk op's arguments (CHUNK_SCHEMA)."""
    return (*(tensors[n] for n in DIFFERENTIABLE), cu_seqlens,
            cu_seqlens_cpu,
            *_call_args(preset, scale, output_final_state, options,
                        fill_A_log), *schedule)


def chunk(where, *args):
    """Calls ``torch.ops.lina.<function>`` (``args``: chunk_args'):
    (o, final state or empty)."""
    return getattr(torch.ops.lina, where[len("lina."):])(*chunk_args(*args))


def decode_args(preset, tensors, state, scale, output_final_state,
                inplace_final_state, options, schedule, fill_A_log) -> tuple:
    """A decode op's arguments (DECODE_SCHEMA)."""
    return (*(tensors[n] for n in INPUTS),
            *(state[n] for n in DECODE_STATE_TENSORS),
            *_call_args(preset, scale, output_final_state, options,
                        fill_A_log), inplace_final_state,
            *(bool(state[n]) for n in DECODE_STATE_FLAGS), *schedule)


def decode(where, *args):
    """Calls ``torch.ops.lina.<fused_recurrent function>`` (``args``:
    decode_args')."""
    return getattr(torch.ops.lina, where[len("lina."):])(*decode_args(*args))


def _bind(names, args, kwargs) -> dict:
    a = dict(zip(names, args))
    a.update(kwargs)
    return a


def _empty(q):
    """The empty float32 tensor that stands for "no final state"."""
    return q.new_empty((0,), dtype=torch.float32)


# ---------------------------------------------------------------------------
# Chunk ops
# ---------------------------------------------------------------------------

def _chunk_kernel(name: str):
    where = "lina." + name

    def kernel(*args, **kwargs):
        from . import ops
        a = _bind(CHUNK_ARGS, args, kwargs)
        o, ht = ops.chunk_forward(
            where, a["preset"], {n: a[n] for n in DIFFERENTIABLE},
            a["cu_seqlens"], a["cu_seqlens_cpu"], a["scale"],
            a["output_final_state"], _options(a),
            tuple(a[n] for n in _SCHEDULE), a["fill_A_log"])
        return o, (_empty(a["q"]) if ht is None else ht)
    return kernel


def _chunk_fake(name: str):
    where = "lina." + name

    def fake(*args, **kwargs):
        from ._checks import head_dims
        a = _bind(CHUNK_ARGS, args, kwargs)
        q, v, cu = a["q"], a["v"], a["cu_seqlens"]
        head_dims(where, q, v)  # its message, not an IndexError below
        o = q.new_empty((q.shape[0], q.shape[1], v.shape[2], v.shape[3]))
        if not a["output_final_state"]:
            return o, _empty(q)
        n = q.shape[0] if cu is None else cu.shape[0] - 1
        return o, q.new_empty((n, v.shape[2], q.shape[3], v.shape[3]),
                              dtype=torch.float32)
    return fake


def _chunk_setup_context(name: str):
    def setup_context(ctx, inputs, output):
        a = _bind(CHUNK_ARGS, inputs, {})
        # An output the loss does not use reaches backward as None (NULL
        # for liblina), not as zeros made for nothing.
        ctx.set_materialize_grads(False)
        ctx.name = name
        ctx.call = [a[n] for n in _CALL_ARGS]
        ctx.output_final_state = a["output_final_state"]
        ctx.dtypes = [getattr(x, "dtype", None) for x in inputs]
        ctx.save_for_backward(*(a[n] for n in _SAVED))
    return setup_context


def _chunk_backward(ctx, grad_o, grad_final_state):
    from . import autograd
    saved = dict(zip(_SAVED, ctx.saved_tensors))
    if not ctx.output_final_state:
        grad_final_state = None  # the empty stand-in's
    grads = torch.ops.lina.chunk_backward(
        ctx.name, *(saved[n] for n in _SAVED), grad_o, grad_final_state,
        *ctx.call)
    given = [n for n in DIFFERENTIABLE if saved[n] is not None]
    return autograd.returned_gradients(
        CHUNK_ARGS, ctx.needs_input_grad, ctx.dtypes, dict(zip(given, grads)),
        lambda t, dtype: t.to(dtype))


def _backward_kernel(*args, **kwargs):
    from . import ops
    a = _bind(BACKWARD_ARGS, args, kwargs)
    tensors = {n: a[n] for n in DIFFERENTIABLE}
    grads = ops.chunk_backward(
        "lina." + a["name"], a["preset"], tensors, a["cu_seqlens"],
        a["scale"], a["output_final_state"], _options(a), a["fill_A_log"],
        a["grad_o"], a["grad_final_state"])
    # lina's own constants (RetNet's decay, KDA's A_log = 0) are no inputs
    # of the op: their gradients stay here.
    return [grads[n] for n in DIFFERENTIABLE if tensors[n] is not None]


def _backward_fake(*args, **kwargs):
    a = _bind(BACKWARD_ARGS, args, kwargs)
    return [a[n].new_empty(a[n].shape, dtype=torch.float32)
            for n in DIFFERENTIABLE if a[n] is not None]


# ---------------------------------------------------------------------------
# Decode ops
# ---------------------------------------------------------------------------

def _decode_forms(a: dict) -> tuple[bool, bool]:
    """(pool, in place): the state forms of decode.check_state."""
    pool = a["ssm_state_indices"] is not None
    inplace = (not pool and a["initial_state"] is not None
               and bool(a["inplace_final_state"]))
    return pool, inplace


def _decode_kernel(name: str):
    where = "lina." + name

    def kernel(*args, **kwargs):
        from . import decode_ops
        a = _bind(DECODE_ARGS, args, kwargs)
        state = {n: a[n] for n in DECODE_STATE_TENSORS + DECODE_STATE_FLAGS}
        o, ht = decode_ops.decode_forward(
            where, a["preset"], {n: a[n] for n in INPUTS}, state, a["scale"],
            a["output_final_state"], a["inplace_final_state"], _options(a),
            (a["warp_columns"], a["warps"]), a["fill_A_log"])
        pool, inplace = _decode_forms(a)
        if a["out"] is not None:
            o = a["q"].new_empty((0,))
        if ht is None or pool or inplace:
            ht = _empty(a["q"])
        return o, ht
    return kernel


def _decode_fake(name: str):
    where = "lina." + name

    def fake(*args, **kwargs):
        from ._checks import head_dims
        a = _bind(DECODE_ARGS, args, kwargs)
        q, v = a["q"], a["v"]
        head_dims(where, q, v)
        B, T = q.shape[0], q.shape[1]
        o = (q.new_empty((0,)) if a["out"] is not None else
             q.new_empty((B, T, v.shape[2], v.shape[3])))
        pool, inplace = _decode_forms(a)
        if pool or inplace or not a["output_final_state"]:
            return o, _empty(q)
        if a["cu_seqlens"] is not None:
            B = a["cu_seqlens"].shape[0] - 1
        K, V = q.shape[3], v.shape[3]
        dims = (V, K) if a["state_v_first"] else (K, V)
        return o, q.new_empty((B, v.shape[2], *dims), dtype=torch.float32)
    return fake


def _register() -> bool:
    """Defines the ops; False where torch cannot (too old)."""
    library = getattr(torch, "library", None)
    if not hasattr(library, "custom_op") or \
            not hasattr(library, "register_autograd"):
        return False
    if hasattr(torch.ops.lina, BACKWARD_OP):
        return True  # another copy of the package registered them
    backward = library.custom_op(f"{NAMESPACE}::{BACKWARD_OP}",
                                 _backward_kernel, mutates_args=(),
                                 schema=BACKWARD_SCHEMA)
    backward.register_fake(_backward_fake)
    for name in CHUNK_OPS:
        op = library.custom_op(f"{NAMESPACE}::{name}", _chunk_kernel(name),
                               mutates_args=(), schema=CHUNK_SCHEMA)
        op.register_fake(_chunk_fake(name))
        op.register_autograd(_chunk_backward,
                             setup_context=_chunk_setup_context(name))
    for name in DECODE_OPS:
        op = library.custom_op(f"{NAMESPACE}::{name}", _decode_kernel(name),
                               mutates_args=DECODE_MUTATES,
                               schema=DECODE_SCHEMA)
        op.register_fake(_decode_fake(name))
    return True


if torch is not None:
    REGISTERED = _register()
