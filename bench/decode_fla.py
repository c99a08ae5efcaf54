#!/usr/bin/env python3
"""lina's decode step against fla's fused_recurrent kernels on one GPU: the
same inputs, the output and state differences, median us per step, GB/s of
state traffic and the ratio.

    python3 bench/decode_fla.py                      # gdn and kda, batch 1/32/256
    python3 bench/decode_fla.py --forms gdn --batches 1,256 --tokens 4
    python3 bench/decode_fla.py --json decode.json --markdown decode.md
    python3 bench/decode_fla.py --state-v-first      # vLLM's [.., V, K] states

Per form and batch B (32 heads, K = V = 128, bf16, T tokens per step, fp32
state [B, 32, 128, 128]):

- fla: fused_recurrent_gated_delta_rule / fused_recurrent_kda with
  initial_state and output_final_state=True (fla's public form: it allocates
  the final state each call). For kda also fla's state pool
  (fused_recurrent_kda_fwd with ssm_state_indices, in place) as "fla pool".
- lina: the same functions with the state pool (initial_state = pool,
  ssm_state_indices = arange(B) int32, updated in place), called eagerly
  and replayed from a CUDA graph (the graph proves no host work per step).

"host us" is the host time of one eager call: the median time a call takes
to return, over calls issued back to back with no synchronisation between
them (the GPU's queue absorbs the kernels), so it is what the Python side,
the checks and the launch cost a serving engine's CPU per call. lina's
repeated calls are replayed by its eager-call extension (lina.eager_extension,
built on first use); "lina py host us" is the same call through the Python
replay instead, without the extension, and the header says whether the
extension loaded. Where the host is slow, an eager step at small batches is
its host time; "fla graph us" and "lina graph us" (replays of one captured
call) then compare the kernels.

With --state-v-first every state is [B, 32, V, K] (fla's and lina's
state_v_first=True, vLLM's pool order) and the form is shown as "gdn/vk".

Times are medians of triton.testing.do_bench (eager) or of CUDA-event timed
graph replays. GB/s counts the state read and written once (2 x B x 32 x
128 x 128 x 4 bytes) over the time; `copy` is torch's device copy of a
tensor of that size at the same batch (read + write), the ceiling lina
aims at (>= 90% at batch 256). fla is taken from .fla/ like
bench/compare_fla.py (see bench/README.md).
"""
from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from compare_fla import setup_imports  # noqa: E402  (fla from .fla/, einops)

HEADS, DIM = 32, 128


def make_inputs(form, B, T, dtype, seed):
    import torch
    import torch.nn.functional as F
    torch.manual_seed(seed)
    dev = "cuda"
    q, k, v = (torch.randn(B, T, HEADS, DIM, dtype=dtype, device=dev)
               for _ in range(3))
    if form == "gdn":
        g = F.logsigmoid(torch.randn(B, T, HEADS, device=dev))
    else:  # kda, as fla's registry: g in [-5, 0)
        g = F.logsigmoid(torch.randn(B, T, HEADS, DIM, device=dev)).clamp(-5, 0)
    beta = torch.randn(B, T, HEADS, device=dev).sigmoid()
    state = 0.1 * torch.randn(B, HEADS, DIM, DIM, device=dev)
    return dict(q=q, k=k, v=v, g=g, beta=beta), state


def graph_us(fn, torch, replays=200):
    """Median us of `replays` CUDA-graph replays of fn (captured after a
    warm-up on a side stream, as torch's docs do)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    for _ in range(10):
        graph.replay()
    times = []
    for _ in range(replays):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    times.sort()
    return times[len(times) // 2]


def host_us(fn, torch, calls=400):
    """Median host time of one eager call of fn, in us: the time to return,
    measured call by call with nothing synchronised in between (a queue of
    `calls` kernels stays under the driver's launch-queue depth)."""
    import time
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - start)
    torch.cuda.synchronize()
    times.sort()
    return times[len(times) // 2] / 1e3


def python_replay_host_us(fn, torch) -> float:
    """host_us of fn with lina's eager-call extension out of the way."""
    from lina import fast_calls
    kept = fast_calls._native
    fast_calls._native = None
    try:
        return host_us(fn, torch)
    finally:
        fast_calls._native = kept


def rel(a, b) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def run_case(form, B, T, args, lina, torch, triton) -> dict:
    from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule
    from fla.ops.kda import fused_recurrent_kda
    from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16,
             "f32": torch.float32}[args.dtype]
    inp, state = make_inputs(form, B, T, dtype, args.seed)
    row = {"form": form + ("/vk" if args.state_v_first else ""), "B": B,
           "T": T, "H": HEADS, "D": DIM, "status": "ok"}
    common = {"use_qk_l2norm_in_kernel": True}
    if args.state_v_first:
        state = state.transpose(-1, -2).contiguous()
        common["state_v_first"] = True
    fla_inp = inp  # gates and betas in float32, as lina reads them

    if form == "gdn":
        def fla_call():
            return fused_recurrent_gated_delta_rule(
                **fla_inp, initial_state=state, output_final_state=True,
                **common)
        lina_fn = lina.fused_recurrent_gated_delta_rule
    else:
        def fla_call():
            return fused_recurrent_kda(
                **fla_inp, initial_state=state, output_final_state=True,
                **common)
        lina_fn = lina.fused_recurrent_kda

    idx = torch.arange(B, dtype=torch.int32, device="cuda")
    pool = state.clone()
    out = torch.empty_like(inp["v"])

    def lina_call():
        return lina_fn(**inp, initial_state=pool, ssm_state_indices=idx,
                       out=out, **common)

    # Correctness: one step of each from the same state.
    with torch.no_grad():
        o_fla, s_fla = fla_call()
        pool.copy_(state)
        o_lina, s_lina = lina_call()
        torch.cuda.synchronize()
        row["rel_o"] = rel(o_lina, o_fla)
        row["rel_state"] = rel(s_lina, s_fla)
        if not torch.isfinite(o_lina).all():
            row["status"] = "FAILED: lina output has NaN/Inf"
        elif max(row["rel_o"], row["rel_state"]) > args.tol:
            row["status"] = "MISMATCH"

        bench = lambda fn: triton.testing.do_bench(  # noqa: E731
            fn, warmup=args.warmup, rep=args.rep, return_mode="median") * 1e3
        row["fla_us"] = bench(fla_call)
        row["lina_us"] = bench(lina_call)
        row["lina_graph_us"] = graph_us(lina_call, torch)
        row["fla_host_us"] = host_us(fla_call, torch)
        row["lina_host_us"] = host_us(lina_call, torch)
        row["lina_py_host_us"] = python_replay_host_us(lina_call, torch)
        try:
            row["fla_graph_us"] = graph_us(fla_call, torch)
        except Exception as e:  # fla's allocation in the call may refuse
            row["fla_graph_us"] = None
            row["fla_graph_error"] = str(e).splitlines()[0][:120]
        if form == "kda":
            fla_pool = state.clone()

            def fla_pool_call():
                return fused_recurrent_kda_fwd(
                    q=inp["q"], k=inp["k"], v=inp["v"], g=inp["g"],
                    beta=inp["beta"], initial_state=fla_pool,
                    inplace_final_state=True, ssm_state_indices=idx,
                    **common)
            row["fla_pool_us"] = bench(fla_pool_call)

        src = torch.empty(B * HEADS * DIM * DIM, device="cuda")
        dst = torch.empty_like(src)
        row["copy_us"] = bench(lambda: dst.copy_(src))

    state_bytes = 2 * B * HEADS * DIM * DIM * 4
    row["state_bytes"] = state_bytes
    for key in ("fla_us", "lina_us", "lina_graph_us", "copy_us",
                "fla_pool_us"):
        if row.get(key):
            row[key.replace("_us", "_gbps")] = state_bytes / (row[key] * 1e-6) / 1e9
    row["fla_over_lina"] = row["fla_us"] / row["lina_us"]
    row["lina_of_copy"] = row["copy_us"] / row["lina_us"]
    return row


def table(rows) -> str:
    lines = ["| form | B | T | fla us | fla pool us | fla graph us | lina us "
             "| lina graph us | fla/lina | lina GB/s | copy GB/s | lina/copy "
             "| fla host us | lina host us | lina py host us | rel o "
             "| rel state | status |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def f(x, fmt="{:.1f}"):
        return "-" if x is None else fmt.format(x)
    for r in rows:
        if "fla_us" not in r:
            lines.append(f"| {r['form']} | {r['B']} | {r['T']} | - | - | - | - "
                         f"| - | - | - | - | - | - | - | - | - | - | {r['status']} |")
            continue
        lines.append(
            f"| {r['form']} | {r['B']} | {r['T']} | {f(r['fla_us'])} "
            f"| {f(r.get('fla_pool_us'))} | {f(r.get('fla_graph_us'))} "
            f"| {f(r['lina_us'])} "
            f"| {f(r['lina_graph_us'])} | {f(r['fla_over_lina'], '{:.2f}')} "
            f"| {f(r.get('lina_gbps'), '{:.0f}')} "
            f"| {f(r.get('copy_gbps'), '{:.0f}')} "
            f"| {f(r['lina_of_copy'], '{:.0%}')} | {f(r.get('fla_host_us'))} "
            f"| {f(r.get('lina_host_us'))} | {f(r.get('lina_py_host_us'))} "
            f"| {f(r['rel_o'], '{:.1e}')} "
            f"| {f(r['rel_state'], '{:.1e}')} | {r['status']} |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--forms", default="gdn,kda")
    p.add_argument("--batches", default="1,32,256")
    p.add_argument("--tokens", type=int, default=1)
    p.add_argument("--dtype", default="bf16", choices=("bf16", "f16", "f32"))
    p.add_argument("--warmup", type=float, default=25)
    p.add_argument("--rep", type=float, default=100)
    p.add_argument("--tol", type=float, default=0.02)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--state-v-first", action="store_true",
                   help="states in [V, K] order (vLLM's pool)")
    p.add_argument("--json")
    p.add_argument("--markdown")
    args = p.parse_args()
    setup_imports()
    import torch
    import triton
    import lina
    forms = args.forms.split(",")
    for form in forms:
        if form not in ("gdn", "kda"):
            sys.exit(f"decode_fla: unknown form {form!r} (gdn, kda)")
    batches = [int(b) for b in args.batches.split(",")]
    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}  "
          f"triton {triton.__version__}  lina {lina.library_version()} "
          f"({lina.library_path()})", flush=True)
    from lina import eager_extension
    extension = eager_extension.load()
    print("eager-call extension: " + (
        "loaded" if extension is not None else
        f"not loaded ({eager_extension.failure()})"), flush=True)
    rows, failed = [], False
    for form in forms:
        for B in batches:
            try:
                row = run_case(form, B, args.tokens, args, lina, torch, triton)
            except Exception as e:
                traceback.print_exc()
                row = {"form": form + ("/vk" if args.state_v_first else ""),
                       "B": B, "T": args.tokens,
                       "status": f"FAILED: {type(e).__name__}: "
                                 f"{str(e).splitlines()[0][:160]}"}
            failed |= row["status"] != "ok"
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(rows, indent=1))
    text = table(rows)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
