#!/usr/bin/env python3
"""lina's and fla's forward error against a float64 recurrence, on the same
inputs, in bf16 and f16.

    python3 bench/precision_fla.py                      # every form, both dtypes
    python3 bench/precision_fla.py --forms kda,gla --dtypes f16 --json out.json

Inputs are compare_fla.py's (fla's benchmark registry). The reference runs
the recurrence token by token in float64 on the GPU from the very values both
libraries read (inputs rounded to the dtype, gates and betas as given), so
each library's error is its own. Reported: ||o - o64|| / ||o64|| for each,
and their ratio lina/fla (< 1: lina is closer).
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_fla  # noqa: E402  (inputs, fla's call conventions, imports)


def reference(form: str, lina_in: dict, scale: float):
    """o in float64 from the recurrence S_t = M_t S_{t-1} + w_t k_t v_t^T,
    o_t = S_t^T (scale q_t), with fla's l2norm of q and k for the delta
    forms."""
    import torch
    import torch.nn.functional as F
    x = {n: t.double() for n, t in lina_in.items()}
    q, k, v = x["q"], x["k"], x["v"]
    if form in ("gdn", "kda"):
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    B, T, H, K = q.shape
    V = v.shape[-1]
    S = torch.zeros(B, H, K, V, dtype=torch.float64, device=q.device)
    o = torch.empty(B, T, H, V, dtype=torch.float64, device=q.device)
    for t in range(T):
        qt, kt, vt = q[:, t] * scale, k[:, t], v[:, t]
        if form == "simple_gla":
            S = S * x["g"][:, t].exp()[..., None, None]
        elif form in ("gla", "kda"):
            S = S * x["g"][:, t].exp()[..., None]
        elif form == "gdn":
            S = S * x["g"][:, t].exp()[..., None, None]
        if form in ("gdn", "kda"):
            beta = x["beta"][:, t][..., None]
            err = vt - torch.einsum("bhkv,bhk->bhv", S, kt)
            S = S + torch.einsum("bhk,bhv->bhkv", kt, beta * err)
        else:
            S = S + torch.einsum("bhk,bhv->bhkv", kt, vt)
        o[:, t] = torch.einsum("bhkv,bhk->bhv", S, qt)
    return o


def rel(x, ref) -> float:
    import torch
    x = x.double()
    if not torch.isfinite(x).all():
        return float("inf")
    return ((x - ref).norm() / ref.norm()).item()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--forms", default="simple_gla,gla,gdn,kda")
    p.add_argument("--dtypes", default="bf16,f16")
    p.add_argument("--shape", default="2,1024,4,128", help="B,T,H,D")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json")
    args = p.parse_args()
    compare_fla.setup_imports()
    import torch
    import lina
    B, T, H, D = (int(s) for s in args.shape.split(","))
    scale = D ** -0.5
    rows = []
    for dtype_name in args.dtypes.split(","):
        dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype_name]
        for form in args.forms.split(","):
            fla_mod, fla_name, lina_name, fla_extra = compare_fla.FORMS[form]
            fla_fn = getattr(importlib.import_module(fla_mod), fla_name)
            lina_fn = getattr(lina, lina_name)
            fla_in, lina_in = compare_fla.make_inputs(form, B, T, H, D, dtype,
                                                      args.seed)
            kw = compare_fla.common_kwargs(form)
            ref = reference(form, fla_in, scale)
            o_fla = fla_fn(**fla_in, **kw, **fla_extra)[0]
            o_lina = lina_fn(**lina_in, **kw)[0]
            e_fla, e_lina = rel(o_fla, ref), rel(o_lina, ref)
            row = {"form": form, "dtype": dtype_name, "fla": e_fla,
                   "lina": e_lina, "ratio": e_lina / e_fla if e_fla else None}
            rows.append(row)
            print(f"{form:<11} {dtype_name:<5} fla {e_fla:.3e}  lina "
                  f"{e_lina:.3e}  lina/fla {row['ratio']:.2f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"shape": [B, T, H, D], "seed": args.seed, "rows": rows,
             "torch": torch.__version__}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
