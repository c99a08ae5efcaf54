"""One sequence across several processes (context parallelism).

The recurrence is linear in (v, initial state), so a rank's stretch of
tokens maps the state it starts from to ``T S + C`` for every form: ``C`` is
its final state from zero and ``T`` (K x K per sequence and value head) its
final state when the same call runs from the identity with ``v = 0``
(docs/algorithms.md, "Stretches of a sequence"). Each rank computes its
(T, C), the ranks exchange them (``all_gather``), each combines those of the
ranks before it into its true starting state and reruns its stretch from it.

The call is given as ``run(v, initial_state) -> (o, final_state)``: any of
lina's chunk functions (or another implementation of the same recurrence)
with the rest of its arguments bound, e.g.

    run = lambda v, h0: lina.chunk_gated_delta_rule(
        q, k, v, g, beta, initial_state=h0, output_final_state=True)
    o, ht = lina.context_parallel.forward(run, v, initial_state=h0)

``v`` is this rank's stretch ``[B, T_rank, HV, V]``; ``initial_state`` (rank 0's
is used; the others' are ignored) is ``[B, HV, K, V]`` or None. Every rank
returns its stretch's outputs and final state; the last rank's is the whole
sequence's. Forward only: up to three calls a rank (C, T and the rerun;
rank 0 makes one, the last rank two), the correctness reference for a faster
scheme, not yet the fast one.
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple


def transition(run: Callable, v, key_dim: int):
    """T for this rank's stretch: the final state of ``run`` from the
    identity with v = 0 and a value dimension of K, [B, HV, K, K]."""
    import torch
    B, _, HV, _ = v.shape
    zero = v.new_zeros(v.shape[:3] + (key_dim,))
    eye = torch.eye(key_dim, dtype=torch.float32, device=v.device)
    _, t = run(zero, eye.expand(B, HV, key_dim, key_dim).contiguous())
    return t


def combine(transitions, contributions, upto: int):
    """The state rank ``upto`` starts from: rank 0's final state (its
    contribution, from the sequence's initial state) carried through ranks
    1 .. upto - 1 as S <- T S + C. None for rank 0."""
    state = None
    for r in range(upto):
        carried = contributions[r].clone()
        if state is not None:
            carried += transitions[r].double().matmul(state.double()).to(
                carried.dtype)
        state = carried
    return state


def forward(run: Callable, v, *, initial_state=None, group=None,
            key_dim: Optional[int] = None) -> Tuple[object, object]:
    """This rank's (o, final_state) of the whole sequence split across the
    ranks of ``group`` (torch.distributed; the default group when None), in
    rank order. ``key_dim`` defaults to the state's K, read from this rank's
    final state."""
    import torch
    import torch.distributed as dist
    rank = dist.get_rank(group)
    world = dist.get_world_size(group)
    # Rank 0 starts where the sequence starts: its call is already the real
    # one, and its final state carries the initial state to the others.
    o, final = run(v, initial_state if rank == 0 else None)
    if final is None:
        raise ValueError("context_parallel.forward: `run` must return the "
                         "final state (pass output_final_state=True)")
    K = key_dim or final.shape[-2]
    # No rank needs rank 0's transition, nor the last rank's; every rank
    # sends one so that the exchange has one shape.
    if 0 < rank < world - 1:
        t = transition(run, v, K)
    else:
        t = final.new_zeros(final.shape[:-2] + (K, K))
    ts = [torch.empty_like(t) for _ in range(world)]
    cs = [torch.empty_like(final) for _ in range(world)]
    dist.all_gather(ts, t.contiguous(), group=group)
    dist.all_gather(cs, final.contiguous(), group=group)
    if rank == 0:
        return o, final
    return run(v, combine(ts, cs, rank))
