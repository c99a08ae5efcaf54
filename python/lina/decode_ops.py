"""fla-compatible decode entry points: ``fla.ops``'s ``fused_recurrent_*``
names and arguments (forward only), each returning ``(o, final_state)``,
for 1 to 16 tokens per sequence. With ``ssm_state_indices`` the call uses a
state pool in place, as fla's KDA and vLLM do (see ``lina.decode``).

Extra keywords: ``ssm_state_indices``, ``num_accepted_tokens``,
``inplace_final_state``, ``out`` (a preallocated output), the serving
layouts' ``state_v_first``, ``intermediate_states_buffer``,
``intermediate_state_indices`` and ``disable_state_update``
(``lina.decode_layouts``; ``cu_seqlens`` packs the tokens), and the decode
schedule ``warp_columns`` (4, 8, 16) and ``warps`` (1-8).
"""
from __future__ import annotations

from . import torch_ops
from .fast_calls import remembered
from ._checks import check_inputs, head_dims
from .decode import (check_state, get_decode_kernel, launch_decode,
                     make_decode_schedule, refuse_grad)
from .decode_layouts import (check_intermediate, check_layout,
                             serving_keywords)
from .ops import (PRESET_FIELDS, _beta_option, _device_index, _gate_options,
                  _kda_options, _refuse_other_layouts, _scale_option,
                  _zeros_like_heads, build_spec, flag, retention_log_decay)


def _decode_extras(where: str, kwargs: dict, **fla) -> tuple:
    """fla arguments with no decode meaning (``fla``: the function's named
    ones, ``kwargs``: the rest) are refused when they ask for something lina
    cannot do; returns the decode schedule and the serving engines' layout
    keywords (decode_layouts)."""
    kwargs = dict(kwargs, **fla)
    serving = serving_keywords(where, kwargs)
    _refuse_other_layouts(where, kwargs)
    if flag(where, "reverse", kwargs.pop("reverse", False)):
        raise ValueError(f"{where}: reverse=True is not supported (decode "
                         "runs forward in time)")
    kwargs.pop("safe_gate", None)  # a promise about g: a hint here
    schedule = make_decode_schedule(kwargs.pop("warp_columns", None),
                                    kwargs.pop("warps", None))
    if kwargs:
        raise TypeError(f"{where}() got an unexpected keyword argument "
                        f"'{next(iter(kwargs))}'")
    return schedule, serving


def _run(where: str, preset: str, *, q, k, v, options: dict, extras: tuple,
         g=None, beta=None, a=None, b=None, A_log=None, dt_bias=None,
         scale=None, initial_state=None, output_final_state=False,
         ssm_state_indices=None, num_accepted_tokens=None,
         inplace_final_state=None, cu_seqlens=None, out=None,
         fill_A_log=False):
    """One decode call: through the ``lina::fused_recurrent_*`` custom op
    when its tensors are torch's (torch.compile then sees one op that
    mutates the state, ``out`` and the intermediate states), else checked
    and launched here. ``extras``: _decode_extras'."""
    schedule, serving = extras
    tensors = dict(q=q, k=k, v=v, g=g, beta=beta, a=a, b=b, A_log=A_log,
                   dt_bias=dt_bias)
    state = dict(initial_state=initial_state,
                 ssm_state_indices=ssm_state_indices,
                 num_accepted_tokens=num_accepted_tokens, out=out,
                 cu_seqlens=cu_seqlens, **serving)
    if not torch_ops.dispatchable(
            *tensors.values(),
            *(state[n] for n in torch_ops.DECODE_STATE_TENSORS)):
        return decode_forward(where, preset, tensors, state, scale,
                              output_final_state, inplace_final_state,
                              options, schedule, fill_A_log)
    # The op records no backward: refused here, before it runs (inside it,
    # autograd has turned grad mode off).
    refuse_grad(where, (q, k, v, g, beta, a, b))
    final = flag(where, "output_final_state", output_final_state)
    o, ht = torch_ops.decode(where, preset, tensors, state, scale, final,
                             inplace_final_state, options, schedule,
                             fill_A_log)
    # The op returns no alias of its inputs: out, the pool and an in-place
    # state come back from here (check_state's forms).
    pool = ssm_state_indices is not None
    inplace = not pool and initial_state is not None and inplace_final_state
    if pool or inplace:
        ht = initial_state
    elif not final:
        ht = None
    return (out if out is not None else o), ht


def _fixed_decay(v, HV: int):
    """fused_recurrent_retention's g, as ops._fixed_decay (through this
    module's retention_log_decay, which the tests replace)."""
    if getattr(v.device, "type", None) != "cuda":
        return None
    return retention_log_decay(HV, v.device)


def decode_forward(where, preset, tensors, state, scale, output_final_state,
                   inplace_final_state, options, schedule, fill_A_log):
    """Checks and launches one decode call: (o, final_state), with o
    ``out`` when given and the final state the pool or the in-place
    initial state in those forms. The ``lina::fused_recurrent_*`` ops'
    kernel (torch_ops.py)."""
    q, v = tensors["q"], tensors["v"]
    initial_state = state["initial_state"]
    ssm_state_indices = state["ssm_state_indices"]
    K, V, H, HV, dtype = head_dims(where, q, v)
    tensors = dict(tensors)
    if preset == "retnet" and tensors["g"] is None:
        tensors["g"] = _fixed_decay(v, HV)  # fused_recurrent_retention
    layout = check_layout(where, q, state.get("cu_seqlens"), state)
    output_final_state = flag(where, "output_final_state", output_final_state)
    options = dict(options, scale=_scale_option(scale, K))
    fields = dict(PRESET_FIELDS[preset], key_dim=K, value_dim=V, heads=H,
                  value_heads=HV, dtype=dtype)
    fields.update((f, val) for f, val in options.items() if val is not None)
    if fill_A_log and tensors["A_log"] is None:
        tensors["A_log"] = _zeros_like_heads(v, HV)
    # The state is none of the spec's business (check_state has it).
    fields["initial_state"] = False
    inputs = check_inputs(where, fields, **tensors)
    checked = check_state(where, fields, q, initial_state, ssm_state_indices,
                          state["num_accepted_tokens"], inplace_final_state,
                          output_final_state, layout)
    check_intermediate(where, fields, q, layout, state,
                       pool=checked.pool is not None,
                       per_token=checked.per_token)
    text = build_spec(preset, (K, V, H, HV, dtype),
                      tuple(sorted(options.items())))
    kernel = get_decode_kernel(text, schedule, _device_index(q))
    return launch_decode(kernel, inputs, checked, where, layout=layout,
                         output_final_state=output_final_state,
                         out=state["out"])


def _beta_required(where, beta):
    if beta is None:
        raise ValueError(f"{where}: 'beta' is required (fla's beta=None "
                         "means beta = 1: pass a float32 [B, T, HV] tensor "
                         "of ones)")


@remembered
def fused_recurrent_gated_delta_rule(
        q, k, v, g=None, gk=None, gv=None, beta=None, scale=None,
        initial_state=None, output_final_state=False,
        use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, A_log=None,
        dt_bias=None, use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
        state_v_first=False, cu_seqlens=None, *, ssm_state_indices=None,
        num_accepted_tokens=None, inplace_final_state=None, out=None,
        **kwargs):
    """fla.ops.gated_delta_rule.fused_recurrent_gated_delta_rule: g
    [B, T, HV] log gates (preset gdn; with use_gate_in_kernel their
    pre-activation, A_log [HV], dt_bias [HV]), or gk [B, T, HV, K]
    per-channel log gates (preset kda), or neither (deltanet); beta
    [B, T, HV], the seventh argument as in fla."""
    where = "lina.fused_recurrent_gated_delta_rule"
    extras = _decode_extras(where, kwargs, state_v_first=state_v_first)
    if (beta is None and g is not None and gk is not None
            and len(getattr(gk, "shape", ())) == 3):
        raise ValueError(f"{where}: gk is [B, T, HV] and beta is missing: "
                         "beta is the seventh argument, as in fla "
                         "(q, k, v, g, gk, gv, beta, ...); pass beta=beta")
    if gv is not None:
        raise ValueError(f"{where}: gv (per-value-channel decay) is not "
                         "supported")
    if g is not None and gk is not None:
        raise ValueError(f"{where}: give g or gk, not both")
    _beta_required(where, beta)
    use_gate_in_kernel = flag(where, "use_gate_in_kernel", use_gate_in_kernel)
    if gk is not None and use_gate_in_kernel:
        raise ValueError(f"{where}: use_gate_in_kernel applies to g; for "
                         "per-channel gates computed in the kernel use "
                         "lina.fused_recurrent_kda")
    preset = "gdn" if g is not None else "kda" if gk is not None else \
        "deltanet"
    options, _ = _gate_options(where, use_gate_in_kernel, A_log, dt_bias, None,
                               allow_lower_bound=False)
    options.update(qk_l2norm=flag(where, "use_qk_l2norm_in_kernel",
                                  use_qk_l2norm_in_kernel),
                   beta=_beta_option(where, use_beta_sigmoid_in_kernel,
                                     allow_neg_eigval))
    return _run(where, preset, q=q, k=k, v=v,
                g=g if g is not None else gk, beta=beta, A_log=A_log,
                dt_bias=dt_bias, options=options, extras=extras,
                scale=scale, initial_state=initial_state,
                output_final_state=output_final_state,
                ssm_state_indices=ssm_state_indices,
                num_accepted_tokens=num_accepted_tokens,
                inplace_final_state=inplace_final_state,
                cu_seqlens=cu_seqlens, out=out)


fused_recurrent_gdn = fused_recurrent_gated_delta_rule


@remembered
def fused_recurrent_kda(
        q, k, v, g, beta, A_log=None, dt_bias=None, scale=None,
        initial_state=None, output_final_state=False,
        use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False,
        use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
        lower_bound=None, state_v_first=False, cu_seqlens=None, *,
        ssm_state_indices=None, num_accepted_tokens=None,
        inplace_final_state=None, out=None, **kwargs):
    """fla.ops.kda.fused_recurrent_kda: g [B, T, HV, K] log gates (or, with
    use_gate_in_kernel, their pre-activation: -exp(A_log) softplus(g +
    dt_bias), or with lower_bound lower_bound * sigmoid(exp(A_log) (g +
    dt_bias))), beta [B, T, HV] (preset kda)."""
    where = "lina.fused_recurrent_kda"
    extras = _decode_extras(where, kwargs, state_v_first=state_v_first)
    options, fill = _kda_options(where, use_gate_in_kernel, A_log, dt_bias,
                                 lower_bound, use_qk_l2norm_in_kernel,
                                 use_beta_sigmoid_in_kernel, allow_neg_eigval)
    return _run(where, "kda", q=q, k=k, v=v, g=g, beta=beta, A_log=A_log,
                dt_bias=dt_bias, options=options, extras=extras,
                scale=scale, initial_state=initial_state,
                output_final_state=output_final_state,
                ssm_state_indices=ssm_state_indices,
                num_accepted_tokens=num_accepted_tokens,
                inplace_final_state=inplace_final_state,
                cu_seqlens=cu_seqlens, out=out, fill_A_log=fill)


@remembered
def fused_recurrent_delta_rule(
        q, k, v, beta=None, scale=None, initial_state=None,
        output_final_state=False, use_qk_l2norm_in_kernel=False,
        cu_seqlens=None, *, ssm_state_indices=None, num_accepted_tokens=None,
        inplace_final_state=None, out=None, **kwargs):
    """fla.ops.delta_rule.fused_recurrent_delta_rule: beta [B, T, HV]
    (preset deltanet)."""
    where = "lina.fused_recurrent_delta_rule"
    extras = _decode_extras(where, kwargs)
    _beta_required(where, beta)
    l2norm = flag(where, "use_qk_l2norm_in_kernel", use_qk_l2norm_in_kernel)
    return _run(where, "deltanet", q=q, k=k, v=v, beta=beta,
                options={"qk_l2norm": l2norm},
                extras=extras, scale=scale, initial_state=initial_state,
                output_final_state=output_final_state,
                ssm_state_indices=ssm_state_indices,
                num_accepted_tokens=num_accepted_tokens,
                inplace_final_state=inplace_final_state,
                cu_seqlens=cu_seqlens, out=out)


def _additive(where, preset, q, k, v, g, kwargs, scale, initial_state,
              output_final_state, cu_seqlens, a=None, b=None, **fla):
    extras = _decode_extras(where, kwargs["extra"], **fla)
    return _run(where, preset, q=q, k=k, v=v, g=g, a=a, b=b, options={},
                extras=extras, scale=scale, initial_state=initial_state,
                output_final_state=output_final_state,
                ssm_state_indices=kwargs["ssm_state_indices"],
                num_accepted_tokens=kwargs["num_accepted_tokens"],
                inplace_final_state=kwargs["inplace_final_state"],
                cu_seqlens=cu_seqlens, out=kwargs["out"])


def _state_kwargs(extra, ssm_state_indices, num_accepted_tokens,
                  inplace_final_state, out):
    return dict(extra=extra, ssm_state_indices=ssm_state_indices,
                num_accepted_tokens=num_accepted_tokens,
                inplace_final_state=inplace_final_state, out=out)


@remembered
def fused_recurrent_simple_gla(
        q, k, v, g=None, g_gamma=None, scale=None, initial_state=None,
        output_final_state=False, reverse=False, state_v_first=False,
        cu_seqlens=None, *, ssm_state_indices=None, num_accepted_tokens=None,
        inplace_final_state=None, out=None, **kwargs):
    """fla.ops.simple_gla.fused_recurrent_simple_gla: g [B, T, HV] (preset
    mamba2), or g_gamma [HV] (retnet), or neither (linear_attn)."""
    where = "lina.fused_recurrent_simple_gla"
    if g is not None and g_gamma is not None:
        raise ValueError(f"{where}: give g or g_gamma, not both")
    preset = ("mamba2" if g is not None else
              "retnet" if g_gamma is not None else "linear_attn")
    return _additive(where, preset, q, k, v,
                     g if g is not None else g_gamma,
                     _state_kwargs(kwargs, ssm_state_indices,
                                   num_accepted_tokens, inplace_final_state,
                                   out),
                     scale, initial_state, output_final_state, cu_seqlens,
                     reverse=reverse, state_v_first=state_v_first)


@remembered
def fused_recurrent_gla(
        q, k, v, gk=None, gv=None, scale=None, initial_state=None,
        output_final_state=False, reverse=False, state_v_first=False,
        cu_seqlens=None, *, ssm_state_indices=None, num_accepted_tokens=None,
        inplace_final_state=None, out=None, **kwargs):
    """fla.ops.gla.fused_recurrent_gla: gk [B, T, HV, K] per-channel log
    gates (preset gla), or none (linear_attn)."""
    where = "lina.fused_recurrent_gla"
    if gv is not None:
        raise ValueError(f"{where}: gv (per-value-channel decay) is not "
                         "supported")
    return _additive(where, "gla" if gk is not None else "linear_attn", q, k,
                     v, gk,
                     _state_kwargs(kwargs, ssm_state_indices,
                                   num_accepted_tokens, inplace_final_state,
                                   out),
                     scale, initial_state, output_final_state, cu_seqlens,
                     reverse=reverse, state_v_first=state_v_first)


@remembered
def fused_recurrent_retention(
        q, k, v, scale=None, initial_state=None, output_final_state=False,
        reverse=False, state_v_first=False, cu_seqlens=None, *,
        ssm_state_indices=None, num_accepted_tokens=None,
        inplace_final_state=None, out=None, **kwargs):
    """fla.ops.retention.fused_recurrent_retention: gamma_h = 1 - 2^(-5-h)
    per (value) head (preset retnet)."""
    where = "lina.fused_recurrent_retention"
    # No g: the retnet preset then reads lina's decay (decode_forward).
    return _additive(where, "retnet", q, k, v, None,
                     _state_kwargs(kwargs, ssm_state_indices,
                                   num_accepted_tokens, inplace_final_state,
                                   out),
                     scale, initial_state, output_final_state, cu_seqlens,
                     reverse=reverse, state_v_first=state_v_first)


@remembered
def fused_recurrent_dplr_delta_rule(
        q, k, v, a, b, gk, scale=None, initial_state=None,
        output_final_state=False, reverse=False, cu_seqlens=None, *,
        ssm_state_indices=None, num_accepted_tokens=None,
        inplace_final_state=None, out=None, **kwargs):
    """fla.ops.generalized_delta_rule.fused_recurrent_dplr_delta_rule
    (preset rwkv7): S_t = (Diag(exp(gk_t)) + b_t a_t^T) S_{t-1} + k_t v_t^T
    with fla's a (read) and b (write); a, b [B, T, HV, K] in q's dtype."""
    where = "lina.fused_recurrent_dplr_delta_rule"
    return _additive(where, "rwkv7", q, k, v, gk,
                     _state_kwargs(kwargs, ssm_state_indices,
                                   num_accepted_tokens, inplace_final_state,
                                   out),
                     scale, initial_state, output_final_state, cu_seqlens,
                     a=a, b=b, reverse=reverse)
