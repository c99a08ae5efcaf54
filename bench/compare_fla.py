#!/usr/bin/env python3
"""lina against fla, forward pass, on one GPU: same inputs, output difference,
median times, lina's achieved bandwidth and FLOP rate.

    python3 bench/compare_fla.py                         # every form x shape
    python3 bench/compare_fla.py --quick                 # a small subset, short timing
    python3 bench/compare_fla.py --forms gdn,kda --shapes B4_T2048_H16_D128,varlen7
    python3 bench/compare_fla.py --json out.json --markdown out.md
    python3 bench/compare_fla.py --report a.json b.json --markdown out.md   # no GPU

fla need not be installed on the GPU machine: its source in `.fla/` (see
bench/README.md) is put on sys.path here, with FLA_DISABLE_BACKEND_DISPATCH=1.
Inputs follow fla's benchmark registry (benchmarks/ops/registry.py); gates and
betas are made once, given to fla in q's dtype (as the registry does) and to
lina as the same values in float32 (what lina reads), outside the timing.
Every case runs on its own: an exception is reported and the next case runs.
"""
from __future__ import annotations

import argparse
import datetime
import glob
import json
import math
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SHAPES = {  # fla's SHAPE_CONFIGS (without D=256), B x T x H x D
    "B1_T8192_H96_D128": (1, 8192, 96, 128),
    "B2_T16384_H16_D128": (2, 16384, 16, 128),
    "B4_T2048_H16_D128": (4, 2048, 16, 128),
    "B4_T4096_H64_D128": (4, 4096, 64, 128),
    "B8_T1024_H8_D64": (8, 1024, 8, 64),
}
VARLEN = {  # packed sequences of uneven lengths, H = 16, D = 128
    "varlen7": ([300, 2048, 1000, 77, 3000, 1200, 567], 16, 128),
    # Two long prompts packed: few (sequence, head) pairs, as B2_T16384.
    "varlen2": ([12000, 20768], 16, 128),
}
ALL_SHAPES = list(SHAPES) + list(VARLEN)
QUICK_SHAPES = ["B4_T2048_H16_D128", "B8_T1024_H8_D64", "varlen7"]

# form: (fla module, function, lina function, fla-only keyword arguments)
FORMS = {
    "simple_gla": ("fla.ops.simple_gla", "chunk_simple_gla", "chunk_simple_gla", {}),
    "gla": ("fla.ops.gla", "chunk_gla", "chunk_gla", {}),
    "gdn": ("fla.ops.gated_delta_rule", "chunk_gated_delta_rule",
            "chunk_gated_delta_rule", {}),
    "kda": ("fla.ops.kda", "chunk_kda", "chunk_kda",
            {"safe_gate": True, "lower_bound": -5}),
    "dplr": ("fla.ops.generalized_delta_rule", "chunk_dplr_delta_rule",
             "chunk_dplr_delta_rule", {}),
    # Not in the default set:
    "retention": ("fla.ops.retention", "chunk_retention", "chunk_retention", {}),
    "delta": ("fla.ops.delta_rule", "chunk_delta_rule", "chunk_delta_rule", {}),
}
DEFAULT_FORMS = ["simple_gla", "gla", "gdn", "kda", "dplr"]
# The lina preset each form runs (what `lina tune` is given with --tune).
PRESETS = {"simple_gla": "mamba2", "gla": "gla", "gdn": "gdn", "kda": "kda",
           "dplr": "rwkv7", "retention": "retnet", "delta": "deltanet"}


# --------------------------------------------------------------------------
# Environment: fla from .fla/, einops from .whl/ when it is not installed
# --------------------------------------------------------------------------

def setup_imports(need_fla: bool = True) -> None:
    """lina's package and, unless `need_fla` is false, fla and einops, from
    the repository's .fla/ and .whl/ where they are not installed."""
    os.environ.setdefault("FLA_DISABLE_BACKEND_DISPATCH", "1")
    os.environ.setdefault("TRITON_CACHE_DIR",
                          str(REPO / "build-bench" / "triton-cache"))
    # fla's autotuned kernels keep their chosen configs in that cache too
    # (Triton's on-disk autotuning cache), so a later run that finds the
    # folder on the GPU machine skips fla's autotuning, which otherwise takes
    # 50-70 s of every case's first call (scripts/gpu-all.sh packs the choices
    # into triton-cache.tgz).
    os.environ.setdefault("TRITON_CACHE_AUTOTUNING", "1")
    sys.path.insert(0, str(REPO / "python"))
    if (REPO / ".fla" / "fla").is_dir():
        sys.path.insert(0, str(REPO / ".fla"))
    if not need_fla:
        return
    try:
        import einops  # noqa: F401
    except ImportError:
        # A pure-Python wheel can be imported straight from the zip file.
        for wheel in sorted(glob.glob(str(REPO / ".whl" / "einops-*.whl"))):
            sys.path.append(wheel)
        try:
            import einops  # noqa: F401
            print(f"einops imported from {sys.path[-1]}", flush=True)
        except ImportError:
            sys.exit("compare_fla: einops is not installed and there is no "
                     ".whl/einops-*.whl; fla needs it. Install it with\n"
                     "  pip install --no-index --target /tmp/site .whl/*.whl "
                     "&& export PYTHONPATH=/tmp/site")


# --------------------------------------------------------------------------
# Inputs (fla's benchmark registry recipes)
# --------------------------------------------------------------------------

def make_inputs(form: str, B: int, T: int, H: int, D: int, dtype, seed: int):
    """(fla kwargs, lina kwargs): the same values; gates and betas in q's
    dtype for fla and in float32 for lina."""
    import torch
    import torch.nn.functional as F
    torch.manual_seed(seed)
    dev = "cuda"

    def randn(*shape):
        return torch.randn(shape, dtype=dtype, device=dev)

    def f32(*shape):
        return torch.randn(shape, dtype=torch.float32, device=dev)

    q, k, v = randn(B, T, H, D), randn(B, T, H, D), randn(B, T, H, D)
    fla = {"q": q, "k": k, "v": v}
    gates = {}
    if form == "simple_gla":
        gates["g"] = F.logsigmoid(f32(B, T, H))
    elif form == "gla":
        gates["g"] = F.logsigmoid(f32(B, T, H, D)).clamp_min(-5)
    elif form == "gdn":
        gates["g"] = F.logsigmoid(f32(B, T, H))
        gates["beta"] = f32(B, T, H).sigmoid()
    elif form == "kda":
        # fla runs KDA with safe_gate=True, lower_bound=-5: keep g in [-5, 0).
        gates["g"] = F.logsigmoid(f32(B, T, H, D)).clamp(-5, 0)
        gates["beta"] = f32(B, T, H).sigmoid()
    elif form == "delta":
        gates["beta"] = f32(B, T, H).sigmoid()
    elif form == "dplr":
        # tests/ops/test_dplr_delta.py: a unit-norm read vector, b = -a, so
        # that the transition (Diag(exp(gk)) - a a^T) is stable.
        a = F.normalize(torch.rand(B, T, H, D, dtype=torch.float32, device=dev),
                        p=2, dim=-1).to(dtype)
        fla["a"], fla["b"] = a, -a
        gates["gk"] = F.logsigmoid(f32(B, T, H, D))
    lina = dict(fla)
    for name, t in gates.items():
        fla[name] = t.to(dtype)
        lina[name] = fla[name].float()
    return fla, lina


def common_kwargs(form: str) -> dict:
    if form in ("gdn", "kda", "delta"):
        return {"use_qk_l2norm_in_kernel": True}   # as fla's registry
    return {}


# --------------------------------------------------------------------------
# Cost model
# --------------------------------------------------------------------------

def lina_bytes(lina_inputs: dict, o) -> int:
    """Bytes lina must move at least: q, k, v, o, g, beta, a, b once."""
    tensors = [o] + [lina_inputs[n] for n in ("q", "k", "v", "g", "gk", "beta",
                                              "a", "b") if n in lina_inputs]
    return sum(t.numel() * t.element_size() for t in tensors)


def nominal_flops(form: str, tokens: int, HV: int, K: int, V: int,
                  C: int = 64) -> float:
    """Matmul FLOPs of the chunkwise algorithm with chunk C, per token and
    value head: 2C(K+V) intra-chunk (scores, scores x values) + 4KV state
    (readout, update); delta rules add the WY terms 4CK + 2CV + 2KV, dplr the
    four score matrices and two low-rank corrections 8CK + 2CV + 4KV."""
    per = 2 * C * (K + V) + 4 * K * V
    if form in ("gdn", "kda", "delta"):
        per += 4 * C * K + 2 * C * V + 2 * K * V
    elif form == "dplr":
        per += 8 * C * K + 2 * C * V + 4 * K * V
    return float(per) * tokens * HV


# --------------------------------------------------------------------------
# lina tune before a case (--tune)
# --------------------------------------------------------------------------

def lina_binary() -> Path | None:
    """$LINA_BIN, else the staged dist/bin/lina, else build/bin/lina."""
    candidates = [REPO / "dist" / "bin" / "lina", REPO / "build" / "bin" / "lina"]
    if os.environ.get("LINA_BIN"):
        candidates.insert(0, Path(os.environ["LINA_BIN"]))
    for path in candidates:
        if path.is_file():
            return path
    return None


def tune_case(form: str, batch: int, seq_len: int, H: int, D: int,
              args, backward: bool = False) -> str:
    """Runs `lina tune` for the form's preset at this case's shape bucket (for
    varlen: the number of sequences and the packed length, the bucket the
    Python call asks for) in the cache the Python calls read, and returns its
    "best:" line. The Python call's spec differs from the preset only in
    flags, so it finds the result through the family lookup
    (docs/autotune.md). With `backward`, the backward's kernels
    (`lina tune --backward`), which the call's backward then runs."""
    binary = lina_binary()
    if binary is None:
        raise RuntimeError("--tune needs the lina binary: set LINA_BIN, or "
                           "stage dist/bin/lina (scripts/gpu-check.sh --stage)")
    cmd = [str(binary), "tune", PRESETS[form], "--shape",
           f"{batch},{seq_len},{H}", "--dk", str(D), "--dv", str(D),
           "--dtype", args.dtype, "--mode", args.tune]
    if backward:
        cmd.append("--backward")
    run = subprocess.run(cmd, capture_output=True, text=True,
                         timeout=args.tune_timeout_s)
    best = [line for line in run.stdout.splitlines()
            if line.startswith("best:")]
    if run.returncode != 0 or not best:
        tail = (run.stderr or run.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"lina tune failed (exit {run.returncode}): "
                           + " | ".join(tail))
    return best[-1][len("best:"):].strip()


def schedule_text(schedule: dict) -> str:
    """As `lina tune` and the cache name a schedule (describe())."""
    return (f"C{schedule['chunk_size']} tv{schedule['tile_v']} "
            f"w{schedule['warps']} {schedule['strategy']}"
            + (" prefetch" if schedule.get("prefetch") else "")
            + (f" segments {schedule['segments']}"
               if schedule.get("segments", 1) > 1 else "")
            + (" warpgroup" if schedule.get("mma") == "warpgroup" else ""))


# --------------------------------------------------------------------------
# One case
# --------------------------------------------------------------------------

def run_case(form: str, shape: str, args, lina, torch, triton) -> dict:
    row = {"form": form, "shape": shape, "status": "ok"}
    fla_mod, fla_name, lina_name, fla_extra = FORMS[form]
    import importlib
    fla_fn = getattr(importlib.import_module(fla_mod), fla_name)
    lina_fn = getattr(lina, lina_name)
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16,
             "f32": torch.float32}[args.dtype]
    if shape in VARLEN:
        lengths, H, D = VARLEN[shape]
        B, T = 1, sum(lengths)
        cu = torch.tensor([0] + lengths, device="cuda").cumsum(0)
        extra = {"cu_seqlens": cu}
        sequences = len(lengths)
    else:
        B, T, H, D = SHAPES[shape]
        extra = {}
        sequences = B
    row.update(B=B, T=T, H=H, D=D)
    if args.tune:
        start = time.perf_counter()
        row["tuned"] = tune_case(form, sequences, T, H, D, args)
        row["tune_s"] = time.perf_counter() - start
    fla_in, lina_in = make_inputs(form, B, T, H, D, dtype, args.seed)
    kw = dict(common_kwargs(form), **extra)
    if args.states:
        N = len(VARLEN[shape][0]) if shape in VARLEN else B
        kw["initial_state"] = torch.randn(N, H, D, D, dtype=torch.float32,
                                          device="cuda")
        kw["output_final_state"] = True
    lina_kw = dict(kw)
    for knob in ("strategy", "chunk_size", "mma"):
        if getattr(args, knob) is not None:
            lina_kw[knob] = getattr(args, knob)

    def run_fla():
        return fla_fn(**fla_in, **kw, **fla_extra)

    def run_lina():
        return lina_fn(**lina_in, **lina_kw)

    def rel(x, ref):
        x, ref = x.double(), ref.double()
        norm = ref.norm().item()
        diff = (x - ref).norm().item()
        return diff / norm if norm > 0 else diff

    with torch.no_grad():
        start = time.perf_counter()
        o_fla, ht_fla = run_fla()
        torch.cuda.synchronize()
        row["fla_first_s"] = time.perf_counter() - start
        known = {id(k) for k in lina.cached_kernels()}
        start = time.perf_counter()
        o_lina, ht_lina = run_lina()
        torch.cuda.synchronize()
        row["lina_first_s"] = time.perf_counter() - start
        built = [k for k in lina.cached_kernels() if id(k) not in known]
        if built:  # else a kernel of an earlier case was reused
            row["lina_schedule"] = schedule_text(built[-1].schedule)

        row["rel_err"] = rel(o_lina, o_fla)
        if args.states:
            row["state_rel_err"] = rel(ht_lina, ht_fla)
        worst = max(row["rel_err"], row.get("state_rel_err", 0.0))
        if not torch.isfinite(o_lina).all().item():
            row["status"] = "FAILED"
            row["message"] = "lina's output has NaN or Inf"
        elif not torch.isfinite(o_fla).all().item():
            row["status"] = "fla-nan"
            row["message"] = "fla's output has NaN or Inf"
        elif not worst <= args.tol:
            row["status"] = "MISMATCH"
            row["message"] = f"relative difference above --tol {args.tol}"
        del o_fla, o_lina, ht_fla, ht_lina

        bench = dict(warmup=args.warmup, rep=args.rep, return_mode="median")
        row["fla_ms"] = triton.testing.do_bench(run_fla, **bench)
        row["lina_ms"] = triton.testing.do_bench(run_lina, **bench)
        o = run_lina()[0]
    row["speedup"] = row["fla_ms"] / row["lina_ms"]
    if row["lina_ms"] > 20 * row["fla_ms"] and row["status"] == "ok":
        row["status"] = "SLOW"
        row["message"] = "lina takes more than 20x fla's time"
    seconds = row["lina_ms"] * 1e-3
    HV, K, V = o.shape[2], lina_in["q"].shape[3], o.shape[3]
    row["lina_GBps"] = lina_bytes(lina_in, o) / seconds * 1e-9
    row["lina_TFLOPs"] = nominal_flops(form, B * T, HV, K, V) / seconds * 1e-12
    row["bw_frac"] = row["lina_GBps"] / args.peak_gbps
    row["flop_frac"] = row["lina_TFLOPs"] / args.peak_tflops
    return row


def context_alive(torch) -> bool:
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
        return True
    except Exception:
        return False


# --------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------

def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def table_rows(rows: list[dict]) -> list[list[str]]:
    out = []
    for r in rows:
        out.append([
            r["form"], r["shape"], r["status"], fmt(r.get("rel_err"), ".2e")
            + ("" if r.get("state_rel_err") is None
               else f" / {r['state_rel_err']:.2e}"),
            fmt(r.get("fla_ms"), ".3f"), fmt(r.get("lina_ms"), ".3f"),
            fmt(r.get("speedup"), ".2f"),
            "-" if r.get("lina_GBps") is None else
            f"{r['lina_GBps']:.0f} ({100 * r['bw_frac']:.0f}%)",
            "-" if r.get("lina_TFLOPs") is None else
            f"{r['lina_TFLOPs']:.1f} ({100 * r['flop_frac']:.0f}%)",
            fmt(r.get("lina_first_s"), ".2f"), r.get("lina_schedule", "-"),
        ])
    return out


HEADER = ["form", "shape", "status", "rel diff", "fla ms", "lina ms",
          "fla/lina", "lina GB/s", "lina TFLOP/s", "lina 1st s",
          "lina schedule"]


def print_table(rows: list[dict], meta: dict) -> None:
    body = table_rows(rows)
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(HEADER)]
    line = "  ".join(h.ljust(w) for h, w in zip(HEADER, widths))
    print("\n" + line + "\n" + "-" * len(line))
    for b in body:
        print("  ".join(c.ljust(w) for c, w in zip(b, widths)))
    for r in rows:
        if r.get("message"):
            print(f"  {r['form']}/{r['shape']}: {r['status']}: {r['message']}")
    print(f"\npeaks: {meta['peak_gbps']} GB/s, {meta['peak_tflops']} TFLOP/s; "
          "times are medians (triton.testing.do_bench); rel diff = "
          "||o_lina - o_fla|| / ||o_fla||")


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [
        f"### lina vs fla, forward, {meta.get('dtype', 'bf16')} — "
        f"{meta.get('date', '?')}",
        "",
        f"GPU: {meta.get('gpu', '?')}; lina: {meta.get('lina_build', '?')}; "
        f"fla: {meta.get('fla', '?')}; torch {meta.get('torch', '?')}, "
        f"triton {meta.get('triton', '?')}.",
        "lina's schedule: " + ("tuned first (`lina tune --mode "
                               f"{meta['tune']}`)" if meta.get("tune", "no")
                               != "no" else "its default or an earlier "
                               "tune's") + "; the schedule column says which.",
        f"Median of triton.testing.do_bench (warmup {meta.get('warmup')} ms, "
        f"rep {meta.get('rep')} ms). Bandwidth counts q, k, v, o, g, beta, a, b "
        f"once, against {meta['peak_gbps']} GB/s; TFLOP/s is the nominal "
        f"chunkwise count (bench/README.md) against {meta['peak_tflops']}.",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    lines += ["| " + " | ".join(b) + " |" for b in table_rows(rows)]
    notes = [f"- {r['form']}/{r['shape']}: {r['status']}: {r['message']}"
             for r in rows if r.get("message")]
    if notes:
        lines += [""] + notes
    return "\n".join(lines) + "\n"


def build_info() -> str:
    # The staged build's commit when there is one: the GPU machine's copy
    # of the tree may hold an older .git HEAD than the build it runs.
    info = REPO / "dist" / "BUILD_INFO"
    if info.is_file():
        return " ".join(info.read_text().split())
    parts = []
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short",
                                 "HEAD"], capture_output=True, text=True,
                                timeout=10).stdout.strip()
        if commit:
            parts.append(f"tree {commit}")
    except Exception:
        pass
    return "; ".join(parts) or "unknown"


# --------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--forms", default=",".join(DEFAULT_FORMS),
                   help=f"comma-separated, from {', '.join(FORMS)} (default: "
                        f"{','.join(DEFAULT_FORMS)})")
    p.add_argument("--shapes", default=None,
                   help=f"comma-separated, from {', '.join(ALL_SHAPES)} or 'all'")
    p.add_argument("--quick", action="store_true",
                   help=f"shapes {','.join(QUICK_SHAPES)} and short timing "
                        "(warmup 10 ms, rep 30 ms) unless given")
    p.add_argument("--warmup", type=int, default=None, help="ms (default 25)")
    p.add_argument("--rep", type=int, default=None, help="ms (default 100)")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    p.add_argument("--strategy", default=None,
                   choices=["default", "fused", "materialize", "split"],
                   help="lina's schedule strategy (default: lina chooses)")
    p.add_argument("--mma", default=None, choices=["warp", "warpgroup"],
                   help="lina's matrix products: warp (mma.sync) or "
                        "warpgroup (Hopper's warpgroup kernels) (default: "
                        "lina chooses)")
    p.add_argument("--chunk-size", type=int, default=None,
                   help="lina's chunk size (default: lina chooses)")
    p.add_argument("--tol", type=float, default=0.02,
                   help="rel diff above this is MISMATCH (default 0.02)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--states", action="store_true",
                   help="also pass a random initial state, ask for the final "
                        "state, and compare it")
    p.add_argument("--peak-gbps", type=float, default=4250.0)
    p.add_argument("--peak-tflops", type=float, default=700.0)
    p.add_argument("--tune", choices=["fast", "full"], default=None,
                   help="run `lina tune --mode MODE` for each case's shape "
                        "first (dist/bin/lina; results in lina's cache, "
                        "$LINA_CACHE_DIR), so that lina runs tuned")
    p.add_argument("--tune-timeout-s", type=float, default=300.0,
                   help="the most one `lina tune` may take (default 300)")
    p.add_argument("--budget-s", type=float, default=480.0,
                   help="start no case after this many seconds (the device "
                        "tool stops a command at 600 s); default 480")
    p.add_argument("--json", default=None, help="write every case here")
    p.add_argument("--markdown", default=None,
                   help="write a table for docs/benchmarks.md here")
    p.add_argument("--report", nargs="+", default=None, metavar="JSON",
                   help="no GPU: merge earlier --json files and print/write "
                        "their table")
    args = p.parse_args(argv)
    forms = [f for f in args.forms.split(",") if f]
    bad = [f for f in forms if f not in FORMS]
    if bad:
        p.error(f"unknown form {bad[0]!r}; choose from {', '.join(FORMS)}")
    if args.shapes in (None, ""):
        shapes = QUICK_SHAPES if args.quick else ALL_SHAPES
    elif args.shapes == "all":
        shapes = ALL_SHAPES
    else:
        shapes = [s for s in args.shapes.split(",") if s]
    bad = [s for s in shapes if s not in SHAPES and s not in VARLEN]
    if bad:
        p.error(f"unknown shape {bad[0]!r}; choose from {', '.join(ALL_SHAPES)}")
    if args.tune and (args.strategy or args.chunk_size or args.mma):
        p.error("--tune picks lina's schedule; it cannot be combined with "
                "--strategy, --chunk-size or --mma")
    args.forms, args.shapes = forms, shapes
    if args.warmup is None:
        args.warmup = 10 if args.quick else 25
    if args.rep is None:
        args.rep = 30 if args.quick else 100
    return args


def write_outputs(args, rows, meta):
    print_table(rows, meta)
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "cases": rows},
                                              indent=1))
        print(f"wrote {args.json}")
    if args.markdown:
        Path(args.markdown).write_text(markdown(rows, meta))
        print(f"wrote {args.markdown}")


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.report:
        rows, meta = [], None
        for name in args.report:
            data = json.loads(Path(name).read_text())
            rows += data["cases"]
            meta = meta or data["meta"]
        write_outputs(args, rows, meta)
        return 0

    setup_imports()
    import torch
    import triton
    import triton.testing  # noqa: F401
    if not torch.cuda.is_available():
        print("compare_fla: no CUDA device; nothing to compare", flush=True)
        return 77
    import lina
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC"),
        "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "triton": triton.__version__, "dtype": args.dtype,
        "lina_build": build_info(), "warmup": args.warmup, "rep": args.rep,
        "peak_gbps": args.peak_gbps, "peak_tflops": args.peak_tflops,
        "strategy": args.strategy or "default",
        "chunk_size": args.chunk_size or "default", "states": args.states,
        "mma": args.mma or "default",
        "tune": args.tune or "no",
    }
    try:
        meta["lina_library"] = str(lina.library_path())
    except lina.LinaError as e:
        print(f"compare_fla: {e}", flush=True)
        return 2
    try:
        import fla
        meta["fla"] = f"{fla.__version__} from {Path(fla.__file__).parent}"
    except Exception as e:
        print(f"compare_fla: cannot import fla ({e}); put its source in "
              ".fla/ (see bench/README.md)", flush=True)
        return 2
    print(f"{meta['gpu']}; torch {meta['torch']}, triton {meta['triton']}; "
          f"lina {meta['lina_library']} ({meta['lina_build']}); fla "
          f"{meta['fla']}", flush=True)

    rows, started, lost, longest = [], time.time(), None, 0.0
    cases = [(f, s) for f in args.forms for s in args.shapes]
    for i, (form, shape) in enumerate(cases):
        if lost is not None:
            rows.append({"form": form, "shape": shape, "status": "NOT RUN",
                         "message": f"the CUDA context was lost in {lost}"})
            continue
        if time.time() - started + longest > args.budget_s:
            rows.append({"form": form, "shape": shape, "status": "NOT RUN",
                         "message": f"time budget of {args.budget_s:.0f} s "
                                    "would be exceeded"})
            continue
        t0 = time.time()
        try:
            row = run_case(form, shape, args, lina, torch, triton)
        except Exception as e:
            row = {"form": form, "shape": shape, "status": "FAILED",
                   "message": f"{type(e).__name__}: {e}".strip()[:500]}
            traceback.print_exc()
            if not context_alive(torch):
                lost = f"{form}/{shape}"
        torch.cuda.empty_cache()
        row["case_s"] = time.time() - t0
        longest = max(longest, row["case_s"])
        rows.append(row)
        if args.json:  # after every case, so that a killed run keeps its rows
            Path(args.json).write_text(json.dumps({"meta": meta, "cases": rows},
                                                  indent=1))
        print(f"[{i + 1}/{len(cases)}] {form}/{shape}: {row['status']} "
              f"rel {fmt(row.get('rel_err'), '.2e')} fla "
              f"{fmt(row.get('fla_ms'), '.3f')} ms lina "
              f"{fmt(row.get('lina_ms'), '.3f')} ms ({time.time() - t0:.1f} s)",
              flush=True)

    write_outputs(args, rows, meta)
    bad = [r for r in rows if r["status"] in ("FAILED", "MISMATCH", "NOT RUN")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
