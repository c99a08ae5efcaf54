"""fla-compatible entry points: the same names, arguments and defaults as
``fla.ops``, each returning ``(o, final_state)``; differentiable
(autograd.py) when a tensor requires grad.

Each call derives the spec from its tensors and options (preset + K, V, H,
HV, dtype from q and v; initial/final state, varlen, scale, qk_l2norm, gate
and beta options as fields), checks every tensor against it, and runs the
cached kernel on the current torch stream.
"""
from __future__ import annotations

import functools
import math
from typing import Any

from . import _capi, autograd, torch_ops
from ._checks import check_inputs, head_dims
from .kernel import get_kernel, launch, make_schedule
from .spec import parse_spec_text, spec_text

# The fields of each preset that decide which tensors a call needs. They are
# checked against lina_preset_spec (test/python/test_args.py), which stays the
# source of the spec text itself.
PRESET_FIELDS = {
    "linear_attn": {"decay": "none", "update": "additive"},
    "retnet": {"decay": "fixed", "update": "additive"},
    "mamba2": {"decay": "scalar", "update": "additive"},
    "gla": {"decay": "per_channel", "update": "additive"},
    "deltanet": {"decay": "none", "update": "delta", "beta": "given"},
    "gdn": {"decay": "scalar", "update": "delta", "beta": "given"},
    "kda": {"decay": "per_channel", "update": "delta", "beta": "given"},
    "rwkv7": {"decay": "per_channel", "update": "dplr"},
}


@functools.lru_cache(maxsize=256)
def build_spec(preset: str, dims: tuple, options: tuple) -> str:
    """The spec text: lina_preset_spec(preset, *dims) with ``options``
    (field, value) pairs set; a value of None removes the field."""
    name, fields = parse_spec_text(_capi.preset_spec(preset, *dims))
    for field, value in options:
        if value is None:
            fields.pop(field, None)
        else:
            fields[field] = value
    return spec_text(name, fields)


def _refuse_other_layouts(where: str, kwargs: dict[str, Any]) -> None:
    """Pops fla's layout keywords from ``kwargs``; raises when one asks for
    a layout lina does not take (head-first inputs, V-first states)."""
    if kwargs.pop("head_first", False):
        raise ValueError(f"{where}: head_first is not supported; inputs are "
                         "[B, T, H, ...]")
    for name in ("state_v_first", "transpose_state_layout"):
        if flag(where, name, kwargs.pop(name, False)):
            raise ValueError(f"{where}: {name}=True is not supported: lina's "
                             "states are [N, HV, K, V] (K-first); pass "
                             "initial_state.transpose(-1, -2) and transpose "
                             "the final state back")


def flag(where: str, name: str, value) -> bool:
    """A boolean argument; a tensor there means a positional call that
    follows another order than fla's."""
    if hasattr(value, "shape"):
        raise TypeError(f"{where}: '{name}' must be a bool, got a tensor "
                        "(positional arguments follow fla's order; pass "
                        "tensors by keyword to be sure)")
    return bool(value)


def _extras(where: str, kwargs: dict[str, Any], **fla: Any) -> tuple:
    """fla arguments that have no lina meaning (``fla``: the function's
    named ones, ``kwargs``: the rest) are accepted when they ask for nothing
    lina cannot do; ``chunk_size`` and ``strategy`` become the schedule.
    Returns the schedule."""
    kwargs = dict(kwargs, **fla)
    _refuse_other_layouts(where, kwargs)
    if flag(where, "return_intermediate_states",
            kwargs.pop("return_intermediate_states", False)):
        raise ValueError(f"{where}: return_intermediate_states=True is not "
                         "supported (lina returns (o, final_state) only)")
    # Hints to fla's kernels: lina's results do not depend on them.
    # use_graph: lina never reads a CUDA cu_seqlens on the host, so its
    # launch depends on the shapes only.
    for hint in ("safe_gate", "disable_recompute", "chunk_indices",
                 "use_graph", "max_num_seqs"):
        kwargs.pop(hint, None)
    schedule = make_schedule(kwargs.pop("chunk_size", None),
                             kwargs.pop("tile_v", None),
                             kwargs.pop("warps", None),
                             kwargs.pop("strategy", None),
                             kwargs.pop("prefetch", None),
                             kwargs.pop("segments", None),
                             kwargs.pop("mma", None),
                             wgmma=kwargs.pop("wgmma", None),
                             stacklevel=3)
    if kwargs:
        raise TypeError(f"{where}() got an unexpected keyword argument "
                        f"'{next(iter(kwargs))}'")
    return schedule


def _scale_option(scale, K: int):
    """None (the spec's default K^-1/2) unless ``scale`` differs from it."""
    if scale is None:
        return None
    scale = float(scale)
    if not math.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale}")
    return None if scale == K ** -0.5 else scale


def _run(where: str, preset: str, *, q, k, v, options: dict[str, Any],
         schedule: tuple, g=None, beta=None, a=None, b=None, A_log=None,
         dt_bias=None, scale=None, initial_state=None,
         output_final_state=False, cu_seqlens=None, cu_seqlens_cpu=None,
         fill_A_log=False, cp_context=None):
    """One fla-named call; with ``cp_context``, this rank's part of the
    sequence the context splits, made of _device_call's
    (context_parallel.run_with_context)."""
    if cp_context is None:
        return _device_call(where, preset, q=q, k=k, v=v, options=options,
                            schedule=schedule, g=g, beta=beta, a=a, b=b,
                            A_log=A_log, dt_bias=dt_bias, scale=scale,
                            initial_state=initial_state,
                            output_final_state=output_final_state,
                            cu_seqlens=cu_seqlens,
                            cu_seqlens_cpu=cu_seqlens_cpu,
                            fill_A_log=fill_A_log)
    from . import context_parallel
    # Each call on this rank: the context's cu_seqlens, and the final
    # state that the ranks exchange.
    call = functools.partial(_device_call, where, preset, q=q, k=k,
                             options=options, schedule=schedule, g=g,
                             beta=beta, a=a, b=b, A_log=A_log,
                             dt_bias=dt_bias, scale=scale,
                             output_final_state=True, fill_A_log=fill_A_log)
    return context_parallel.run_with_context(
        where, cp_context, call, v=v, initial_state=initial_state,
        output_final_state=flag(where, "output_final_state",
                                output_final_state),
        cu_seqlens=cu_seqlens)


def _device_call(where: str, preset: str, *, q, k, v,
                 options: dict[str, Any], schedule: tuple, g=None,
                 beta=None, a=None, b=None, A_log=None, dt_bias=None,
                 scale=None, initial_state=None, output_final_state=False,
                 cu_seqlens=None, cu_seqlens_cpu=None, fill_A_log=False):
    """One fla-named call on this device: through the ``lina::`` custom op
    when its tensors are torch's (so that torch.compile sees one op, and
    autograd the op's registered backward), else checked and launched here
    (the stand-in tensors of the tests, a torch without torch.library)."""
    tensors = dict(q=q, k=k, v=v, g=g, beta=beta, a=a, b=b, A_log=A_log,
                   dt_bias=dt_bias, initial_state=initial_state)
    if torch_ops.dispatchable(*tensors.values(), cu_seqlens, cu_seqlens_cpu):
        final = flag(where, "output_final_state", output_final_state)
        o, ht = torch_ops.chunk(where, preset, tensors, cu_seqlens,
                                cu_seqlens_cpu, scale, final, options,
                                schedule, fill_A_log)
        return o, (ht if final else None)
    call, tensors = _prepare(where, preset, tensors, options, schedule,
                             scale, output_final_state, cu_seqlens,
                             cu_seqlens_cpu, fill_A_log)
    if autograd.wants_grad(tensors.values()):
        return autograd.run(where, call, tensors)
    return call(tensors)[0]


def _prepare(where, preset, tensors, options, schedule, scale,
             output_final_state, cu_seqlens, cu_seqlens_cpu, fill_A_log):
    """(the call as ``_forward(tensors)``, ``tensors`` with lina's
    constants added): RetNet's decay where the retnet preset has no g (only
    ``chunk_retention``), A_log = 0 for KDA's lower-bound gate without
    A_log."""
    q, v = tensors["q"], tensors["v"]
    K, V, H, HV, dtype = head_dims(where, q, v)
    tensors = dict(tensors)
    if preset == "retnet" and tensors["g"] is None:
        tensors["g"] = _fixed_decay(v, HV)
    options = dict(options)
    options.update(scale=_scale_option(scale, K),
                   initial_state=tensors["initial_state"] is not None,
                   final_state=flag(where, "output_final_state",
                                    output_final_state),
                   varlen=cu_seqlens is not None)
    fields = dict(PRESET_FIELDS[preset], key_dim=K, value_dim=V, heads=H,
                  value_heads=HV, dtype=dtype)
    fields.update((f, val) for f, val in options.items() if val is not None)
    if fill_A_log and tensors["A_log"] is None:
        tensors["A_log"] = _zeros_like_heads(v, HV)
    # lina's input names -> the caller's tensors (or lina's constants, which
    # do not require grad): what autograd differentiates.
    call = functools.partial(_forward, where, preset, fields, options,
                             schedule, cu_seqlens, cu_seqlens_cpu)
    return call, tensors


def _check(where, preset, fields, options, cu_seqlens, cu_seqlens_cpu,
           tensors, read_values=True):
    """(the checked inputs, the spec text) of a call."""
    K, V = fields["key_dim"], fields["value_dim"]
    H, HV, dtype = fields["heads"], fields["value_heads"], fields["dtype"]
    inputs = check_inputs(where, fields, **tensors, cu_seqlens=cu_seqlens,
                          cu_seqlens_cpu=cu_seqlens_cpu,
                          read_values=read_values)
    text = build_spec(preset, (K, V, H, HV, dtype),
                      tuple(sorted(options.items())))
    return inputs, text


def _forward(where, preset, fields, options, schedule, cu_seqlens,
             cu_seqlens_cpu, tensors):
    """Checks and launches one call: ((o, final_state), what its backward
    needs)."""
    inputs, text = _check(where, preset, fields, options, cu_seqlens,
                          cu_seqlens_cpu, tensors)
    # Varlen: the number of sequences and the longest one's length, as the
    # loader's default and tuned lookup take them, where the lengths are on
    # the host (cu_seqlens_cpu); else the packed length, a bound on it (the
    # longest is not known without reading cu_seqlens from the GPU).
    batch = inputs.num_sequences if cu_seqlens is not None else inputs.batch
    length = inputs.longest or inputs.seq_len
    device = _device_index(tensors["q"])
    kernel = get_kernel(text, schedule, device,
                        (batch, length, fields["value_heads"]))
    return (launch(kernel, inputs, where),
            autograd.Launched(inputs, text, device))


def chunk_forward(where, preset, tensors, cu_seqlens, cu_seqlens_cpu, scale,
                  output_final_state, options, schedule, fill_A_log):
    """(o, final_state or None) of one call, without autograd: the
    ``lina::chunk_*`` ops' kernel (torch_ops.py)."""
    call, tensors = _prepare(where, preset, tensors, options, schedule,
                             scale, output_final_state, cu_seqlens,
                             cu_seqlens_cpu, fill_A_log)
    return call(tensors)[0]


def chunk_backward(where, preset, tensors, cu_seqlens, scale,
                   output_final_state, options, fill_A_log, do, dht) -> dict:
    """The fp32 gradients of one call's inputs by lina's name (lina's
    constants included): the ``lina::chunk_backward`` op's kernel. The
    inputs are checked again without reading values (the forward read
    them), converted as the forward converted them."""
    call, tensors = _prepare(where, preset, tensors, options, None, scale,
                             output_final_state, cu_seqlens, None,
                             fill_A_log)
    fields, options = call.args[2], call.args[3]
    inputs, text = _check(where, preset, fields, options, cu_seqlens, None,
                          tensors, read_values=False)
    saved = {name: getattr(inputs, name) for name in autograd.SAVED}
    launched = autograd.Launched(inputs, text, _device_index(tensors["q"]))
    return autograd.launch_backward(launched, saved, do, dht)


def _device_index(t) -> int:
    index = t.device.index
    if index is None:
        import torch
        index = torch.cuda.current_device()
    return index


_constants: dict[tuple, Any] = {}


def _zeros_like_heads(v, HV: int):
    """A_log = 0 (exp(A_log) = 1): fla's lower-bound gate without A_log."""
    if getattr(v.device, "type", None) != "cuda":
        return None  # the device check reports v
    key = ("zeros", HV, str(v.device))
    if key not in _constants:
        import torch
        _constants[key] = torch.zeros(HV, dtype=torch.float32, device=v.device)
    return _constants[key]


def _fixed_decay(v, HV: int):
    """chunk_retention's g: lina's decay on v's GPU (None elsewhere: the
    device check then reports v)."""
    if getattr(v.device, "type", None) != "cuda":
        return None
    return retention_log_decay(HV, v.device)


def retention_log_decay(HV: int, device):
    """fla's RetNet decay per head: log(1 - 2^(-5 - h)), float32."""
    key = ("retnet", HV, str(device))
    if key not in _constants:
        import torch
        h = torch.arange(HV, dtype=torch.float32, device=device)
        two = torch.tensor(2.0, dtype=torch.float32, device=device)
        _constants[key] = (1 - two.pow(-5.0 - h)).log()
    return _constants[key]


def _beta_option(where, use_beta_sigmoid_in_kernel, allow_neg_eigval):
    use_beta_sigmoid_in_kernel = flag(where, "use_beta_sigmoid_in_kernel",
                                      use_beta_sigmoid_in_kernel)
    allow_neg_eigval = flag(where, "allow_neg_eigval", allow_neg_eigval)
    if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
        raise ValueError(f"{where}: allow_neg_eigval=True requires "
                         "use_beta_sigmoid_in_kernel=True")
    if not use_beta_sigmoid_in_kernel:
        return "given"
    return "two_sigmoid" if allow_neg_eigval else "sigmoid"


def _gate_options(where, use_gate_in_kernel, A_log, dt_bias, lower_bound,
                  allow_lower_bound):
    """(options, fill_A_log) for fla's in-kernel gate."""
    if not use_gate_in_kernel:
        if A_log is not None or dt_bias is not None:
            raise ValueError(f"{where}: A_log and dt_bias are only used with "
                             "use_gate_in_kernel=True")
        return {}, False
    if allow_lower_bound and lower_bound is not None:
        lower_bound = float(lower_bound)
        if not lower_bound < 0:
            raise ValueError(f"{where}: lower_bound must be negative, got "
                             f"{lower_bound}")
        return {"gate": "lower_bound", "gate_lower_bound": lower_bound}, True
    if A_log is None:
        raise ValueError(f"{where}: A_log must be given when "
                         "use_gate_in_kernel=True"
                         + (" and lower_bound is not set" if allow_lower_bound
                            else ""))
    return {"gate": "softplus"}, False


def chunk_simple_gla(q, k, v, g=None, g_gamma=None, scale=None,
                     initial_state=None, output_final_state=False,
                     state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
                     *, cp_context=None, **kwargs):
    """fla.ops.simple_gla.chunk_simple_gla: g [B, T, HV] log gates (preset
    mamba2), or g_gamma [HV] fixed log decay (retnet), or neither
    (linear_attn)."""
    where = "lina.chunk_simple_gla"
    schedule = _extras(where, kwargs, state_v_first=state_v_first)
    if g is not None and g_gamma is not None:
        raise ValueError(f"{where}: give g or g_gamma, not both")
    preset = ("mamba2" if g is not None else
              "retnet" if g_gamma is not None else "linear_attn")
    return _run(where, preset, q=q, k=k, v=v,
                g=g if g is not None else g_gamma, options={},
                schedule=schedule, scale=scale, initial_state=initial_state,
                output_final_state=output_final_state, cu_seqlens=cu_seqlens,
                cu_seqlens_cpu=cu_seqlens_cpu, cp_context=cp_context)


def chunk_retention(q, k, v, scale=None, initial_state=None,
                    output_final_state=False, cu_seqlens=None, *,
                    cu_seqlens_cpu=None, cp_context=None, **kwargs):
    """fla.ops.retention.chunk_retention: fixed decay gamma_h = 1 - 2^(-5-h)
    per (value) head h (preset retnet). ``cu_seqlens_cpu`` (lina's, keyword
    only): the lengths on the host, as for the other functions."""
    where = "lina.chunk_retention"
    schedule = _extras(where, kwargs)
    # No g: the retnet preset then reads lina's decay (_prepare).
    return _run(where, "retnet", q=q, k=k, v=v, options={},
                schedule=schedule, scale=scale, initial_state=initial_state,
                output_final_state=output_final_state, cu_seqlens=cu_seqlens,
                cu_seqlens_cpu=cu_seqlens_cpu, cp_context=cp_context)


def chunk_gla(q, k, v, g, scale=None, initial_state=None,
              output_final_state=False, state_v_first=False, cu_seqlens=None,
              cu_seqlens_cpu=None, *, cp_context=None, **kwargs):
    """fla.ops.gla.chunk_gla: g [B, T, HV, K] per-channel log gates (preset
    gla)."""
    where = "lina.chunk_gla"
    schedule = _extras(where, kwargs, state_v_first=state_v_first)
    return _run(where, "gla", q=q, k=k, v=v, g=g, options={},
                schedule=schedule, scale=scale, initial_state=initial_state,
                output_final_state=output_final_state, cu_seqlens=cu_seqlens,
                cu_seqlens_cpu=cu_seqlens_cpu, cp_context=cp_context)


def chunk_delta_rule(q, k, v, beta, scale=None, initial_state=None,
                     output_final_state=False, use_qk_l2norm_in_kernel=False,
                     cu_seqlens=None, cu_seqlens_cpu=None, *,
                     cp_context=None, **kwargs):
    """fla.ops.delta_rule.chunk_delta_rule: beta [B, T, HV] (preset
    deltanet)."""
    where = "lina.chunk_delta_rule"
    schedule = _extras(where, kwargs)
    l2norm = flag(where, "use_qk_l2norm_in_kernel", use_qk_l2norm_in_kernel)
    return _run(where, "deltanet", q=q, k=k, v=v, beta=beta,
                options={"qk_l2norm": l2norm},
                schedule=schedule, scale=scale, initial_state=initial_state,
                output_final_state=output_final_state, cu_seqlens=cu_seqlens,
                cu_seqlens_cpu=cu_seqlens_cpu, cp_context=cp_context)


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None,
                           output_final_state=False,
                           use_qk_l2norm_in_kernel=False,
                           use_beta_sigmoid_in_kernel=False,
                           allow_neg_eigval=False, state_v_first=False,
                           cu_seqlens=None, cu_seqlens_cpu=None,
                           chunk_indices=None, cp_context=None, *,
                           use_gate_in_kernel=False, A_log=None, dt_bias=None,
                           **kwargs):
    """fla.ops.gated_delta_rule.chunk_gated_delta_rule: g [B, T, HV] log gates
    (or their pre-activation with use_gate_in_kernel, A_log [HV], dt_bias
    [HV]: keyword only, as fla reads them from its **kwargs), beta
    [B, T, HV] (preset gdn)."""
    where = "lina.chunk_gated_delta_rule"
    schedule = _extras(where, kwargs, state_v_first=state_v_first,
                       chunk_indices=chunk_indices)
    options, _ = _gate_options(where, flag(where, "use_gate_in_kernel",
                                           use_gate_in_kernel),
                               A_log, dt_bias, None, allow_lower_bound=False)
    options.update(qk_l2norm=flag(where, "use_qk_l2norm_in_kernel",
                                  use_qk_l2norm_in_kernel),
                   beta=_beta_option(where, use_beta_sigmoid_in_kernel,
                                     allow_neg_eigval))
    return _run(where, "gdn", q=q, k=k, v=v, g=g, beta=beta, A_log=A_log,
                dt_bias=dt_bias, options=options, schedule=schedule,
                scale=scale, initial_state=initial_state,
                output_final_state=output_final_state, cu_seqlens=cu_seqlens,
                cu_seqlens_cpu=cu_seqlens_cpu, cp_context=cp_context)


chunk_gdn = chunk_gated_delta_rule


def _kda_options(where, use_gate_in_kernel, A_log, dt_bias, lower_bound,
                 use_qk_l2norm_in_kernel, use_beta_sigmoid_in_kernel,
                 allow_neg_eigval):
    """The spec options and gate fill of a KDA call, chunked or decode: the
    gate (given or computed, with an optional lower bound), l2norm and
    beta's activation."""
    options, fill = _gate_options(where, flag(where, "use_gate_in_kernel",
                                              use_gate_in_kernel),
                                  A_log, dt_bias, lower_bound,
                                  allow_lower_bound=True)
    options.update(qk_l2norm=flag(where, "use_qk_l2norm_in_kernel",
                                  use_qk_l2norm_in_kernel),
                   beta=_beta_option(where, use_beta_sigmoid_in_kernel,
                                     allow_neg_eigval))
    return options, fill


def chunk_kda(q, k, v, g, beta, scale=None, initial_state=None,
              output_final_state=False, use_qk_l2norm_in_kernel=False,
              use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False,
              allow_neg_eigval=False, safe_gate=False, lower_bound=None,
              disable_recompute=False, return_intermediate_states=False,
              state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None,
              cp_context=None, use_graph=False, max_num_seqs=None, *,
              A_log=None, dt_bias=None, **kwargs):
    """fla.ops.kda.chunk_kda: g [B, T, HV, K] log gates, beta [B, T, HV]
    (preset kda). With use_gate_in_kernel, g is the pre-activation:
    -exp(A_log) softplus(g + dt_bias), or with lower_bound
    lower_bound * sigmoid(exp(A_log) (g + dt_bias)) (A_log may then be None);
    dt_bias is [HV * K] or [HV, K]. A_log and dt_bias are keyword only, as
    fla reads them from its **kwargs."""
    where = "lina.chunk_kda"
    if (flag(where, "use_graph", use_graph) and max_num_seqs is not None
            and cu_seqlens is not None
            and int(max_num_seqs) != int(cu_seqlens.shape[0]) - 1):
        raise ValueError(f"{where}: max_num_seqs = {max_num_seqs} but "
                         f"cu_seqlens holds {int(cu_seqlens.shape[0]) - 1} "
                         "sequences; pad cu_seqlens with zero-length "
                         "sequences to max_num_seqs + 1 entries")
    schedule = _extras(where, kwargs, safe_gate=safe_gate,
                       disable_recompute=disable_recompute,
                       return_intermediate_states=return_intermediate_states,
                       state_v_first=state_v_first, use_graph=use_graph,
                       max_num_seqs=max_num_seqs)
    options, fill = _kda_options(where, use_gate_in_kernel, A_log, dt_bias,
                                 lower_bound, use_qk_l2norm_in_kernel,
                                 use_beta_sigmoid_in_kernel, allow_neg_eigval)
    return _run(where, "kda", q=q, k=k, v=v, g=g, beta=beta, A_log=A_log,
                dt_bias=dt_bias, options=options, schedule=schedule,
                scale=scale, initial_state=initial_state,
                output_final_state=output_final_state, cu_seqlens=cu_seqlens,
                cu_seqlens_cpu=cu_seqlens_cpu, fill_A_log=fill,
                cp_context=cp_context)


def chunk_dplr_delta_rule(q, k, v, a, b, gk, scale=None, initial_state=None,
                          output_final_state=False, cu_seqlens=None,
                          cu_seqlens_cpu=None, safe_gate=False,
                          chunk_size=None, disable_recompute=False,
                          cp_context=None, lower_bound=None, **kwargs):
    """fla.ops.generalized_delta_rule.chunk_dplr_delta_rule (preset rwkv7):
    S_t = (Diag(exp(gk_t)) + b_t a_t^T) S_{t-1} + k_t v_t^T, with fla's a
    (read, a^T S) as lina's a and fla's b (write) as lina's b; a, b
    [B, T, HV, K] in q's dtype, gk [B, T, HV, K] log decay. chunk_size is
    lina's schedule chunk size; lower_bound (fla: a promise that
    lower_bound <= gk < 0) is a hint here."""
    where = "lina.chunk_dplr_delta_rule"
    if lower_bound is not None and not float(lower_bound) < 0:
        raise ValueError(f"{where}: lower_bound must be negative (gk is a "
                         f"log decay < 0), got {lower_bound}")
    schedule = _extras(where, kwargs, safe_gate=safe_gate,
                       chunk_size=chunk_size,
                       disable_recompute=disable_recompute)
    return _run(where, "rwkv7", q=q, k=k, v=v, g=gk, a=a, b=b, options={},
                schedule=schedule, scale=scale, initial_state=initial_state,
                output_final_state=output_final_state, cu_seqlens=cu_seqlens,
                cu_seqlens_cpu=cu_seqlens_cpu, cp_context=cp_context)
