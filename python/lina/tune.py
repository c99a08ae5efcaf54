"""``lina.tune``: what ``lina tune`` does, from Python (``lina_tune`` in the
C API, docs/autotune.md)."""
from __future__ import annotations

import dataclasses

from . import _capi, autograd, kernel

_MODES = {"fast": _capi.TuneMode.FAST, "full": _capi.TuneMode.FULL}


@dataclasses.dataclass(frozen=True)
class TuneResult:
    """What ``lina.tune`` found.

    Attributes:
        schedule (dict):
            The winner, as ``Kernel.schedule`` spells it (``chunk_size``,
            ``tile_v``, ``warps``, ``strategy``, ``prefetch``, ``segments``,
            ``mma``; a backward tune's has ``chunk_size``, ``tile_v`` and
            ``warps`` only): the fastest schedule recorded for the spec, this
            GPU and the shape's bucket, which kernels (or backward calls) of
            that bucket now use.
        ms (float):
            Its median time for one forward call (one backward call) at the
            tuned shape (the cost model's estimate when simulated).
        candidates (int):
            The search space.
        pruned (int):
            Candidates pruned before any trial: they cannot run on this GPU.
        tried (int):
            Candidates compiled, checked and timed by this call.
        recorded (int):
            Candidates read back from lina's cache: an earlier tune timed
            them.
        saved (bool):
            Whether the results are in the cache file, where later processes
            find them.
        not_saved_reason (str | None):
            Why not, when ``saved`` is False (the cache cannot be written, or
            ``LINA_CACHE`` is off).
    """
    schedule: dict
    ms: float
    candidates: int
    pruned: int
    tried: int
    recorded: int
    saved: bool
    not_saved_reason: str | None = None


def tune(spec, batch, seq_len, *, mode="fast", device=None, simulate=False,
         backward=False, **fields) -> TuneResult:
    r"""
    Finds the fastest schedule for a spec at a shape and records it in lina's
    cache (``$LINA_CACHE_DIR/lina.db``, else ``~/.cache/lina/lina.db``), as
    ``lina tune`` does. Kernels made afterwards for any shape of the same
    bucket use it, in this process and in later ones: the fla-style functions
    whenever no schedule knob is set, and ``lina.compile(..., batch=,
    seq_len=)``. Each candidate is compiled, checked against the float64
    reference and timed with CUDA events; candidates an earlier tune recorded
    are read back, not timed again. Blocks until done (seconds for
    ``'fast'``, up to an hour for ``'full'`` at large shapes); the GPU should
    be otherwise idle.

    Args:
        spec (str):
            A preset name (``lina presets``; fla's names work too), then
            ``key_dim``, ``value_dim`` and ``heads`` are required,
            ``value_heads`` defaults to ``heads`` and ``dtype`` to ``'bf16'``;
            or spec text holding one ``lina.recurrence`` (docs/spec.md).
        batch (int):
            The number of sequences `B` of the calls to tune for (with
            ``varlen=True``, the number of sequences packed in a call).
        seq_len (int):
            Their length `T` (varlen: the longest).
        mode (str):
            ``'fast'``: coordinate descent from the default schedule, one knob
            at a time, at most 12 candidates. ``'full'``: every viable
            candidate. Default: ``'fast'``.
        device (Optional[int | str | torch.device]):
            The GPU. Default: `None` (the current one).
        simulate (bool):
            Time the candidates with lina's cost model instead of the GPU, on
            any machine; the results are recorded under a GPU named
            ``'simulated'``, which no device matches, so they never steer a
            real kernel (for tests and previews). Default: `False`.
        backward (bool):
            Tune the backward's kernels (training) instead: their chunk
            size, value tile and warps, each candidate checked against the
            float64 backward and timed as backward calls on random inputs.
            The gradients of later calls of the bucket (``loss.backward()``
            through the fla-named functions) then run the winner. Default:
            `False`.
        **fields:
            Spec fields (``varlen``, ``initial_state``, ``qk_l2norm``, ...), as
            ``lina.compile`` takes them.

    Returns:
        A ``lina.TuneResult``: ``schedule`` (the winner), ``ms``,
        ``candidates``, ``pruned``, ``tried``, ``recorded``, ``saved`` and
        ``not_saved_reason``.

    Raises:
        ValueError: a bad ``batch``, ``seq_len`` or ``mode``, or a preset
            without its dimensions.
        TypeError: an unknown keyword.
        lina.LinaError: liblina's refusal, e.g. ``NO_DRIVER`` without a GPU
            (unless ``simulate=True``), ``INVALID_ARGUMENT`` for a spec it
            rejects or an unknown preset.

    Examples::
        >>> import lina
        >>> r = lina.tune("gated_delta_rule", 1, 8192, key_dim=128,
        ...               value_dim=128, heads=96)
        >>> r.schedule, r.ms     # on an H200
        ({'chunk_size': 64, 'tile_v': 128, 'warps': 8, 'strategy': 'fused',
          'prefetch': True, 'segments': 1, 'mma': 'warpgroup'}, 0.599)
        # later calls of the bucket run the winner
        >>> o, ht = lina.chunk_gated_delta_rule(q, k, v, g, beta)
        # and for training, the backward's own schedule
        >>> lina.tune("gated_delta_rule", 1, 8192, key_dim=128,
        ...           value_dim=128, heads=96, backward=True).schedule
        {'chunk_size': ..., 'tile_v': ..., 'warps': ...}
    """
    where = "lina.tune"
    if mode not in _MODES:
        raise ValueError(f"{where}: 'mode' must be 'fast' or 'full', got "
                         f"{mode!r}")
    kernel.check_shape(where, batch, seq_len)
    for name, flag in (("simulate", simulate), ("backward", backward)):
        if not isinstance(flag, bool):
            raise ValueError(f"{where}: '{name}' must be True or False, got "
                             f"{flag!r}")
    text = kernel.resolve_spec(where, spec, fields,
                               "tune: mode, device, simulate, backward")
    flags = _capi.TuneMode.BACKWARD if backward else 0
    out = _capi.tune(text, batch, seq_len, _MODES[mode] | flags,
                     kernel.device_index(device), simulate)
    # Kernels built for a bucket remember its schedule: the tune may have
    # changed it.
    if backward:
        autograd.forget_buckets()
        schedule = {"chunk_size": out.schedule.chunk_size,
                    "tile_v": out.schedule.tile_v,
                    "warps": out.schedule.warps}
    else:
        kernel.forget_buckets()
        schedule = kernel.schedule_dict(out.schedule)
    return TuneResult(
        schedule=schedule, ms=out.time_ms, candidates=out.candidates,
        pruned=out.pruned,
        tried=out.tried, recorded=out.recorded, saved=bool(out.saved),
        not_saved_reason=out.not_saved_reason.decode("utf-8", "replace")
        or None)
