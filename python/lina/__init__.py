"""lina: linear attention kernels compiled from one spec, for PyTorch.

The fla-compatible functions return ``(o, final_state)``; the chunk_* ones
are differentiable, and all are torch.library ops that torch.compile traces
(torch_ops.py):

    from lina import chunk_gated_delta_rule
    o, ht = chunk_gated_delta_rule(q, k, v, g, beta, output_final_state=True)

``lina.compile`` gives a kernel for any spec (docs/spec.md); ``lina.tune``
finds the fastest schedule for a spec at a shape, which later calls of that
shape's bucket use (docs/autotune.md). The ``fused_recurrent_*`` functions
decode 1 to 16 tokens per sequence, also against a state pool updated in
place (docs/decode.md). liblina.so is loaded on first use (see
``lina._capi.candidate_paths``); importing the package needs neither the
library nor a GPU. See docs/python.md.
"""
from ._capi import LinaError, Status, Strategy, candidate_paths, library_path
from ._capi import version as library_version
from .kernel import Kernel, cached_kernels, clear_cache, compile
from .ops import (chunk_delta_rule, chunk_dplr_delta_rule, chunk_gated_delta_rule,
                  chunk_gdn, chunk_gla, chunk_kda, chunk_retention,
                  chunk_simple_gla)
from .decode import DecodeKernel, get_decode_kernel
from .decode_ops import (fused_recurrent_delta_rule,
                         fused_recurrent_dplr_delta_rule,
                         fused_recurrent_gated_delta_rule, fused_recurrent_gdn,
                         fused_recurrent_gla, fused_recurrent_kda,
                         fused_recurrent_retention, fused_recurrent_simple_gla)
from .spec import parse_spec_text, spec_text
from .tune import TuneResult, tune
# A submodule users reach as lina.context_parallel after `import lina`, as
# the documentation and fla's own layout have it; it imports nothing heavy.
from . import context_parallel

__version__ = "0.1.0"

__all__ = [
    "LinaError", "Status", "Strategy", "Kernel", "compile", "clear_cache",
    "cached_kernels", "tune", "TuneResult",
    "candidate_paths", "library_path", "library_version", "spec_text",
    "parse_spec_text", "chunk_simple_gla", "chunk_gla", "chunk_delta_rule",
    "chunk_gated_delta_rule", "chunk_gdn", "chunk_kda", "chunk_dplr_delta_rule",
    "chunk_retention", "DecodeKernel", "get_decode_kernel",
    "fused_recurrent_gated_delta_rule", "fused_recurrent_gdn",
    "fused_recurrent_kda", "fused_recurrent_delta_rule",
    "fused_recurrent_simple_gla", "fused_recurrent_gla",
    "fused_recurrent_retention", "fused_recurrent_dplr_delta_rule",
]
