"""The serving engines' decode layouts (docs/decode.md): packed tokens with
``cu_seqlens``, states in ``[V, K]`` order (``state_v_first``), the
intermediate state buffer and ``disable_state_update``.

vLLM calls fla's ``fused_recurrent_*`` with q ``[1, num_tokens, H, K]``, an
int32 ``cu_seqlens`` (its ``query_start_loc``) and a state pool; FlashInfer
and sglang keep the state after every draft token in
``intermediate_states_buffer`` ``[rows, steps, HV, K, V]`` and leave the
pool alone (``disable_state_update``). Everything here is checked on the
host from shapes only: a CUDA ``cu_seqlens`` is not read (that would wait
for the stream), so a call stays capturable in a CUDA graph.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._checks import Checker, _shape
from .decode import check_tokens
from .ops import flag


@dataclass
class Layout:
    """Where a call's sequences and states are: the checked keywords."""
    batch: int                  # sequences (len(cu_seqlens) - 1 when packed)
    tokens: int | None          # T of [B, T] inputs; None when packed
    cu_seqlens: Any = None      # int32 or int64 [batch + 1], as given
    v_first: bool = False       # every state is [.., V, K]
    intermediate: Any = None    # float32 [rows, steps, HV, K, V] (or V, K)
    intermediate_indices: Any = None  # int32 [batch]
    disable_state_update: bool = False

    @property
    def packed(self) -> bool:
        return self.cu_seqlens is not None

    def state_dims(self, K: int, V: int) -> tuple[list[int], str]:
        """A head's state shape and its names."""
        return ([V, K], "V, K") if self.v_first else ([K, V], "K, V")


def serving_keywords(where: str, kwargs: dict) -> dict:
    """Pops the layout keywords from ``kwargs`` (fla's deprecated
    ``transpose_state_layout`` is ``state_v_first``)."""
    v_first = flag(where, "state_v_first", kwargs.pop("state_v_first", False))
    if flag(where, "transpose_state_layout",
            kwargs.pop("transpose_state_layout", False)):
        v_first = True
    return dict(
        state_v_first=v_first,
        intermediate_states_buffer=kwargs.pop("intermediate_states_buffer",
                                              None),
        intermediate_state_indices=kwargs.pop("intermediate_state_indices",
                                              None),
        disable_state_update=flag(where, "disable_state_update",
                                  kwargs.pop("disable_state_update", False)))


def _exact(c: Checker, name: str, t, device, dtypes: tuple, why: str):
    """A tensor the kernel reads or writes as it is: no copy is made."""
    c.tensor(name, t)
    c.cuda(name, t, device)
    if str(t.dtype) not in dtypes:
        c.fail(f"'{name}' must be {' or '.join(dtypes)} {why}, got {t.dtype}")
    if not t.is_contiguous():
        c.fail(f"'{name}' must be contiguous ({why})")


def check_layout(where: str, q, cu_seqlens, serving: dict) -> Layout:
    """The call's sequences: [B, T] batches, or packed tokens with
    ``cu_seqlens``; and the state order."""
    c = Checker(where)
    if cu_seqlens is None:
        check_tokens(where, q)
        return Layout(batch=int(q.shape[0]), tokens=int(q.shape[1]),
                      v_first=serving["state_v_first"])
    _exact(c, "cu_seqlens", cu_seqlens, q.device,
           ("torch.int32", "torch.int64"),
           "(each sequence's token offsets, read in place)")
    if len(cu_seqlens.shape) != 1 or int(cu_seqlens.shape[0]) < 2:
        c.fail(f"'cu_seqlens' must have shape [N + 1] with N >= 1 "
               f"sequences, got {_shape(cu_seqlens)}")
    if int(q.shape[0]) != 1:
        c.fail(f"with cu_seqlens the tokens are packed: q must be "
               f"[1, num_tokens, H, K], got batch {int(q.shape[0])} "
               "(flatten with q.reshape(1, -1, H, K))")
    return Layout(batch=int(cu_seqlens.shape[0]) - 1, tokens=None,
                  cu_seqlens=cu_seqlens, v_first=serving["state_v_first"])


def check_intermediate(where: str, fields, q, layout: Layout, serving: dict,
                       pool: bool, per_token: bool) -> None:
    """The intermediate state buffer, its indices and
    disable_state_update, into ``layout``."""
    c = Checker(where)
    HV, K, V = fields["value_heads"], fields["key_dim"], fields["value_dim"]
    dims, names = layout.state_dims(K, V)
    buffer = serving["intermediate_states_buffer"]
    indices = serving["intermediate_state_indices"]
    if buffer is not None:
        _exact(c, "intermediate_states_buffer", buffer, q.device,
               ("torch.float32",), "(the kernel writes the states there)")
        shape = _shape(buffer)
        if len(shape) != 5 or shape[2:] != [HV, *dims] or min(shape[:2]) < 1:
            c.fail(f"'intermediate_states_buffer' must have shape [rows, "
                   f"steps, HV, {names}] = [rows, steps, {HV}, "
                   f"{dims[0]}, {dims[1]}], got {shape}")
        if layout.tokens is not None and shape[1] < layout.tokens:
            c.fail(f"'intermediate_states_buffer' keeps {shape[1]} steps per "
                   f"sequence but the call has T = {layout.tokens} tokens: "
                   "give a buffer with at least T steps")
        if indices is not None:
            _exact(c, "intermediate_state_indices", indices, q.device,
                   ("torch.int32",), "(convert once with .to(torch.int32))")
            c.shape("intermediate_state_indices", indices, "N",
                    [layout.batch])
        layout.intermediate = buffer
        layout.intermediate_indices = indices
    elif indices is not None:
        c.fail("'intermediate_state_indices' picks rows of "
               "intermediate_states_buffer: give the buffer too")
    if serving["disable_state_update"]:
        if not pool or per_token:
            c.fail("disable_state_update=True leaves the pool's slots as "
                   "they were: it needs the state pool with "
                   "ssm_state_indices [N] (a slot per sequence)")
        layout.disable_state_update = True
