"""Gated DeltaNet with lina, checked against fla when it is installed.

    PYTHONPATH=python python3 examples/python/gdn.py

Needs a CUDA GPU, torch, and liblina.so (build/lib or dist/lib, or
$LINA_LIBRARY). fla is optional: with it, the outputs are compared.
"""
import torch
import torch.nn.functional as F

import lina

torch.manual_seed(0)
B, T, H, K, V = 2, 2048, 8, 128, 128
dev, dt = "cuda", torch.bfloat16
q = torch.randn(B, T, H, K, device=dev, dtype=dt)
k = F.normalize(torch.randn(B, T, H, K, device=dev), dim=-1).to(dt)
v = torch.randn(B, T, H, V, device=dev, dtype=dt)
g = F.logsigmoid(torch.randn(B, T, H, device=dev))
beta = torch.randn(B, T, H, device=dev).sigmoid()
h0 = torch.randn(B, H, K, V, device=dev)

with torch.no_grad():
    o, ht = lina.chunk_gated_delta_rule(
        q, k, v, g, beta, initial_state=h0, output_final_state=True)
print("lina:", tuple(o.shape), o.dtype, "final state", tuple(ht.shape))

try:
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_gdn
except ImportError:
    print("fla not installed: skipping the comparison")
else:
    with torch.no_grad():
        o_fla, ht_fla = fla_gdn(q, k, v, g, beta, initial_state=h0,
                                output_final_state=True)
    rel = lambda x, y: ((x.float() - y.float()).norm() / y.float().norm()).item()
    print(f"vs fla: output {rel(o, o_fla):.2e}, state {rel(ht, ht_fla):.2e}")
