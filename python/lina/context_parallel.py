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
sequence's. Up to three calls a rank (C, T and the rerun; rank 0 makes one,
the last rank two), the correctness reference for a faster scheme, not yet
the fast one.

Differentiable where ``run`` is: the exchange's backward sums over the ranks
the gradients of every rank's (T, C) (``exchange``), and each call's own
backward does the rest, so that every rank gets its inputs' gradients of
the whole run (rank 0 also the initial state's). Every rank must then call
backward, as with any collective in a model.
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
    final state. Differentiable where ``run`` is: every rank's gradients
    are the whole run's (exchange)."""
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
    # Rank 0's outputs do not depend on what it gathers: they pass through
    # the exchange so that its backward joins the other ranks' all_reduce.
    ts, cs, through = exchange(t, final, group, *((o, final) if rank == 0
                                                  else ()))
    if rank == 0:
        return through[0], through[1]
    return run(v, combine(ts, cs, rank))


def exchange(t, c, group, *through):
    """(every rank's T, every rank's C, ``through``): one all_gather of this
    rank's (T, C), differentiable. Every rank's C is an intermediate state
    of the whole run, read by every later rank: the backward sums over the
    ranks (all_reduce) the gradients each rank's loss gives every rank's
    (T, C), and each rank takes its own, the whole run's chain rule split
    across the ranks.

    The all_reduce needs every rank or none: where any rank's (T, C) carry
    gradients (read from a flag gathered with them), every rank's gathered
    values do, and ``through`` (rank 0's outputs, which do not depend on
    what it gathers) passes through the same node, so that each rank's
    backward reaches it. ``through`` comes back unchanged otherwise."""
    import torch
    import torch.distributed as dist
    packed = torch.cat([t.reshape(-1), c.reshape(-1)])
    wants = packed.requires_grad
    flagged = torch.cat([packed.detach(),
                         packed.new_full((1,), float(wants))])
    world = dist.get_world_size(group)
    gathered = flagged.new_empty((world,) + tuple(flagged.shape))
    dist.all_gather(list(gathered.unbind(0)), flagged, group=group)
    gathered, flags = gathered[:, :-1], gathered[:, -1]
    # Without grad mode no rank has a backward: no flag to read (reading
    # it waits for the exchange on a GPU).
    if torch.is_grad_enabled() and bool(flags.any()):
        if not wants:
            # This rank's (T, C) do not depend on its inputs, but its
            # outputs depend on the others' through what it gathers.
            packed = packed.detach().requires_grad_()
        gathered, *through = _exchange_function().apply(group, packed,
                                                        gathered, *through)
    n = t.numel()
    ts = [row[:n].view(t.shape) for row in gathered.unbind(0)]
    cs = [row[n:].view(c.shape) for row in gathered.unbind(0)]
    return ts, cs, list(through)


_exchange_class = None


def _exchange_function():
    """exchange's autograd Function, defined on first use so that importing
    lina does not import torch."""
    global _exchange_class
    if _exchange_class is not None:
        return _exchange_class
    import torch
    import torch.distributed as dist

    class Exchange(torch.autograd.Function):
        """(gathered, *through) with the gathered (T, C) (already
        exchanged) made to depend on this rank's own."""
        @staticmethod
        def forward(ctx, group, packed, gathered, *through):
            ctx.group = group
            ctx.rank = dist.get_rank(group)
            return (gathered.clone(), *(x.view_as(x) for x in through))

        @staticmethod
        def backward(ctx, d_gathered, *d_through):
            # An output the loss does not read has zeros here (autograd
            # materializes them), so every rank joins the all_reduce.
            d = d_gathered.contiguous().clone()
            dist.all_reduce(d, op=dist.ReduceOp.SUM, group=ctx.group)
            return (None, d[ctx.rank], None, *d_through)

    _exchange_class = Exchange
    return Exchange
