"""The scratch memory of a chunk call (the materialize and split strategies,
segments) and of a backward call, taken from torch's caching allocator.

liblina's ``*_with_workspace`` entry points run a call in memory the caller
lends it, so each call gets its own, allocated on the current stream: two
streams never share it, and under ``torch.cuda.CUDAGraph`` capture it comes
from the graph's private pool, which the graph keeps for its replays (a
workspace liblina owned would be reallocated by a later, larger call and
leave the graph pointing at freed memory). The tensor is freed when the
launching function returns; the allocator hands the block out again only to
work ordered after the launches on that stream.
"""
from __future__ import annotations

import threading
from typing import Callable

# Shapes remembered per kernel. Varlen serving sees a new packed length at
# almost every call: the oldest are dropped past this many.
_MAX_SHAPES = 4096


class WorkspaceSizes:
    """The bytes of workspace each call shape of one kernel needs, asked of
    liblina (``query(handle, batch, seq_len, num_sequences)``) once per
    shape: a shape always needs the same."""

    def __init__(self, query: Callable[[int, int, int, int], int],
                 handle: int):
        self._query = query
        self._handle = handle
        self._sizes: dict[tuple[int, int, int], int] = {}
        self._lock = threading.Lock()

    def __call__(self, batch: int, seq_len: int, num_sequences: int) -> int:
        key = (batch, seq_len, num_sequences)
        nbytes = self._sizes.get(key)
        if nbytes is None:
            nbytes = self._query(self._handle, *key)
            # Only a miss locks: calls from several threads may add and
            # drop shapes at once.
            with self._lock:
                if len(self._sizes) >= _MAX_SHAPES:
                    self._sizes.pop(next(iter(self._sizes)))
                self._sizes[key] = nbytes
        return nbytes


def allocate(torch, nbytes: int, device):
    """``nbytes`` of memory on ``device`` from torch's caching allocator, on
    the current stream (a uint8 tensor); None when nothing is needed."""
    if nbytes == 0:
        return None
    return torch.empty(nbytes, dtype=torch.uint8, device=device)
