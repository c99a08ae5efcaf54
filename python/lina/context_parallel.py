"""One sequence across several processes (context parallelism).

In fla's style: ``build_cp_context`` gives this rank's ``CPContext``, and
the chunk functions take it as ``cp_context=`` (ops._run calls
``run_with_context``). Underneath, for any call, ``forward``:

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

from dataclasses import dataclass
from typing import Any, Callable, Optional, Tuple

LAYOUTS = ("contiguous",)
# fla's layouts that lina does not split by.
FLA_ONLY_LAYOUTS = ("zigzag",)


@dataclass(frozen=True, eq=False)
class CPContext:
    """Where this rank's stretch lies in the sequence and which group
    shares it (fla's ``FLACPContext``): built once per batch by
    ``build_cp_context`` and passed as ``cp_context=`` to the chunk
    functions. ``start`` and ``end`` bound this rank's tokens in the
    sequence; ``cu_seqlens`` and ``cu_seqlens_cpu`` are its stretch as one
    sequence, ``[0, end - start]`` (None where the context was built from
    ``bounds``). Compared by identity (its tensors have no one truth
    value)."""
    group: Any
    rank: int
    world_size: int
    start: int
    end: int
    cu_seqlens: Any = None
    cu_seqlens_cpu: Any = None
    conv1d_kernel_size: Optional[int] = None
    layout: str = "contiguous"

    @property
    def is_first_rank(self) -> bool:
        return self.rank == 0

    @property
    def is_last_rank(self) -> bool:
        return self.rank == self.world_size - 1

    @property
    def pre_num_ranks(self) -> int:
        """The ranks before this one that hold the same sequence."""
        return self.rank

    @property
    def post_num_ranks(self) -> int:
        """The ranks after this one that hold the same sequence."""
        return self.world_size - 1 - self.rank

    @property
    def num_seqs(self) -> int:
        """Sequences in this rank's cu_seqlens (0 without them), as fla
        counts them."""
        return 0 if self.cu_seqlens is None else 1

    @property
    def is_cp_enabled(self) -> bool:
        return self.group is not None


def build_cp_context(cu_seqlens=None, group=None, conv1d_kernel_size=None,
                     cu_seqlens_cpu=None, use_tf32x3_affine_chain=True,
                     layout="contiguous", *, bounds=None) -> CPContext:
    """This rank's ``CPContext``: fla's ``build_cp_context``, its arguments
    in its order.

    ``cu_seqlens`` is the sequence's before the split, ``[0, T]``: one
    sequence (a packed batch of several is refused), split as fla splits
    it, ``T / world_size`` tokens a rank in rank order. The calls then take
    ``[1, T / world_size, ...]`` inputs, and the context's cu_seqlens
    (``[0, T / world_size]``, on cu_seqlens' device) replace theirs.
    ``cu_seqlens_cpu`` (the same on the host) saves reading cu_seqlens back.

    ``bounds=(start, end)`` (lina's, keyword only, instead of cu_seqlens):
    this rank's tokens, for stretches of any lengths and ``[B, T_rank,
    ...]`` inputs, each of the B sequences cut at the same places. Building
    from bounds is a collective: every rank of the group calls it, and all
    refuse unless the bounds tile ``[0, T)`` in rank order.

    ``group``: the ranks that share the sequence (torch.distributed; None:
    the default group). ``conv1d_kernel_size`` is kept for fla's short
    convolutions (lina's functions do not read it).
    ``use_tf32x3_affine_chain`` is fla's precision switch, without effect
    here (lina combines the states in float64). ``layout``: 'contiguous';
    fla's 'zigzag' is refused."""
    where = "lina.context_parallel.build_cp_context"
    import torch
    import torch.distributed as dist
    group, rank, world = _group(where, group)
    if layout in FLA_ONLY_LAYOUTS:
        raise ValueError(f"{where}: layout={layout!r} is not supported: "
                         "lina gives each rank one stretch of the sequence, "
                         "in rank order; use layout='contiguous'")
    if layout not in LAYOUTS:
        raise ValueError(f"{where}: layout must be 'contiguous', got "
                         f"{layout!r}")
    if conv1d_kernel_size is not None and (
            isinstance(conv1d_kernel_size, bool)
            or not isinstance(conv1d_kernel_size, int)
            or conv1d_kernel_size < 1):
        raise ValueError(f"{where}: conv1d_kernel_size must be a positive "
                         f"int or None, got {conv1d_kernel_size!r}")
    if (cu_seqlens is None) == (bounds is None):
        raise ValueError(f"{where}: give the sequence's cu_seqlens (split "
                         "evenly over the ranks, as fla splits it) or this "
                         "rank's bounds=(start, end), "
                         + ("not both" if bounds is not None else
                            "got neither"))
    common = dict(group=group, rank=rank, world_size=world,
                  conv1d_kernel_size=conv1d_kernel_size, layout=layout)
    if bounds is not None:
        # Checked after the exchange, so that a rank with bad bounds does
        # not leave the others waiting in it: all see all and raise alike.
        mine = _bounds(bounds)
        every = [None] * world
        dist.all_gather_object(every, mine, group=group)
        _check_tiling(where, every, rank, bounds)
        return CPContext(start=mine[0], end=mine[1], **common)
    start, end = _even_split(where, cu_seqlens, cu_seqlens_cpu, rank, world)
    local = torch.tensor([0, end - start], dtype=torch.int64)
    return CPContext(start=start, end=end,
                     cu_seqlens=local.to(cu_seqlens.device),
                     cu_seqlens_cpu=local, **common)


def _group(where: str, group):
    """(the group, this rank in it, its size); refuses what is no group
    this process can use."""
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(f"{where}: torch.distributed is not initialized; "
                           "call torch.distributed.init_process_group first")
    if group is dist.GroupMember.NON_GROUP_MEMBER:
        raise ValueError(f"{where}: this process is not in the group "
                         "(new_group gives the processes outside it a "
                         "placeholder); build the context on the group's "
                         "ranks only")
    if group is not None and not isinstance(group, dist.ProcessGroup):
        raise TypeError(f"{where}: group must be a torch.distributed "
                        "ProcessGroup (or None for the default group), got "
                        f"{type(group).__name__}")
    if group is None:
        group = dist.group.WORLD
    rank = dist.get_rank(group)
    if rank < 0:
        raise ValueError(f"{where}: this process is not in the group; build "
                         "the context on the group's ranks only")
    return group, rank, dist.get_world_size(group)


def _even_split(where, cu_seqlens, cu_seqlens_cpu, rank, world):
    """(start, end) of this rank's T / world tokens of the one sequence
    ``cu_seqlens`` holds."""
    host = cu_seqlens_cpu if cu_seqlens_cpu is not None else cu_seqlens
    for name, t in (("cu_seqlens", cu_seqlens),
                    ("cu_seqlens_cpu", cu_seqlens_cpu)):
        if t is None:
            continue
        if not hasattr(t, "shape") or len(t.shape) != 1 or \
                str(t.dtype) not in ("torch.int64", "torch.int32"):
            raise TypeError(f"{where}: {name} must be a 1-D int64 or int32 "
                            "tensor of cumulative lengths, got "
                            + (f"{t.dtype} of shape {list(t.shape)}"
                               if hasattr(t, "shape") else type(t).__name__))
    values = [int(x) for x in host.tolist()]
    if len(values) < 2 or values[0] != 0 or any(
            b < a for a, b in zip(values, values[1:])):
        raise ValueError(f"{where}: cu_seqlens must start at 0 and be "
                         f"non-decreasing, with at least 2 entries, got "
                         f"{values}")
    if len(values) != 2:
        raise ValueError(f"{where}: cu_seqlens holds {len(values) - 1} "
                         "sequences, but lina's context parallelism splits "
                         "one sequence across the ranks (a packed batch "
                         "whose sequences cross the ranks' boundaries is not "
                         "supported yet); give it one sequence, [0, T]")
    total = values[1]
    if total < world:
        raise ValueError(f"{where}: the sequence's {total} tokens leave a "
                         f"rank of the {world} without any; every rank needs "
                         "at least one (use fewer ranks)")
    if total % world:
        raise ValueError(f"{where}: the sequence's {total} tokens do not "
                         f"split evenly over {world} ranks; pad it to a "
                         f"multiple of {world}, or give each rank its "
                         "bounds=(start, end)")
    part = total // world
    return part * rank, part * (rank + 1)


def _bounds(bounds):
    """(start, end) as ints, or None where ``bounds`` is not a pair of
    ints (_check_tiling names it after the exchange)."""
    try:
        start, end = bounds
    except (TypeError, ValueError):
        return None
    if not all(isinstance(x, int) and not isinstance(x, bool)
               for x in (start, end)):
        return None
    return int(start), int(end)


def _check_tiling(where: str, every: list, rank: int, given) -> None:
    """Every rank's bounds must be a pair of ints and the pairs must tile
    [0, T) in rank order, none empty. Every rank sees every rank's bounds,
    so all raise the same error (naming its own bounds where they are the
    bad ones)."""
    for r, b in enumerate(every):
        if b is None:
            raise TypeError(f"{where}: bounds must be a pair of ints "
                            "(start, end), got " + (
                                repr(given) if r == rank else
                                f"something else on rank {r}"))
    for r, (start, end) in enumerate(every):
        if end <= start:
            raise ValueError(f"{where}: rank {r}'s bounds [{start}, {end}) "
                             "hold no tokens; every rank needs at least one "
                             "(use fewer ranks)")
        first = 0 if r == 0 else every[r - 1][1]
        if start != first:
            raise ValueError(f"{where}: the ranks' bounds must tile the "
                             f"sequence in rank order from 0, but rank {r} "
                             f"starts at {start}, not {first}")


def check_context(where: str, cp_context) -> CPContext:
    """``cp_context`` if it is lina's; a TypeError that names the builder
    otherwise (fla's FLACPContext included: its fields describe fla's
    kernels' split, not lina's)."""
    if not isinstance(cp_context, CPContext):
        raise TypeError(f"{where}: cp_context must be a "
                        "lina.context_parallel.CPContext, built by "
                        "lina.context_parallel.build_cp_context, got "
                        f"{type(cp_context).__name__}")
    return cp_context


def run_with_context(where: str, cp_context, call: Callable, *, v,
                     initial_state, output_final_state: bool, cu_seqlens):
    """A chunk function's call with ``cp_context``: this rank's
    (o, final_state or None). ``call(v=, initial_state=, cu_seqlens=,
    cu_seqlens_cpu=)`` is the function's call on this rank, everything
    else bound, returning (o, final_state). The context's cu_seqlens
    replace the call's, as in fla; a context built from bounds has none,
    and refuses them."""
    ctx = check_context(where, cp_context)
    if ctx.cu_seqlens is None and cu_seqlens is not None:
        raise ValueError(f"{where}: cu_seqlens with a cp_context built from "
                         "bounds (B sequences cut alike); build the context "
                         "from the sequence's cu_seqlens instead")
    tokens = int(v.shape[1]) if len(v.shape) == 4 else None
    if tokens != ctx.end - ctx.start:
        raise ValueError(f"{where}: this rank's inputs hold {tokens} tokens "
                         "(v's dimension 1), but its cp_context gives it "
                         f"[{ctx.start}, {ctx.end}), {ctx.end - ctx.start} "
                         "tokens")

    def run(vv, h0):
        return call(v=vv, initial_state=h0, cu_seqlens=ctx.cu_seqlens,
                    cu_seqlens_cpu=ctx.cu_seqlens_cpu)
    o, final = forward(run, v, initial_state=initial_state, group=ctx.group)
    return o, (final if output_final_state else None)


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
