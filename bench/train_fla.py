"""Forward + backward of lina's fla-named functions against fla 0.6.0's on
the same inputs, in one process on one GPU: the median time of a
training step's attention call (forward, then backward of <dO, o>), its
peak memory, and where fla runs, the ratio fla / lina. Where fla refuses
(its Hopper guard on some triton versions) the row says so and, for gdn and
simple_gla, times fla's forward kernel plus the backward of fla's naive
chunk reference (fla/ops/*/naive.py) instead, the ratio marked "(naive
bwd)".

    python3 bench/train_fla.py [--forms gdn,kda] [--shapes B4_T2048_H16_D128]
        [--tune fast|full] [--lina-only]

With --tune, `lina tune` runs for each case's shape first, for the forward
and for the backward (`--backward`), in lina's cache ($LINA_CACHE_DIR), so
that the lina call runs both tuned; a line before the row says what each
tune picked.

fla and einops come from .fla/ and .whl/ as for bench/compare_fla.py,
whose shapes and inputs this uses.

fla's first training call compiles and autotunes its Triton kernels (minutes
for a backward, cold). `--warm-fla SECONDS` first runs fla's step for every
case in parallel processes, one per form, with Triton's autotuning results
not kept (FLA_CACHE_RESULTS=0 TRITON_CACHE_AUTOTUNING=0: they were timed under
contention), so that the timed run finds the kernels compiled and autotunes
alone. `--lina-only` times lina alone (fla's columns stay empty), which
needs neither fla's kernels compiled nor its minutes of autotuning.
"""
from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import time
import traceback

import compare_fla as cf


def step(fn, inputs: dict, kw: dict, grad_out):
    """One forward and backward; the inputs' .grad are cleared first."""
    for t in inputs.values():
        if t.requires_grad:
            t.grad = None
    o, _ = fn(**inputs, **kw)
    o.backward(grad_out)


def median_ms(torch, run, repeats: int, prepare=None) -> float:
    """The median time of `repeats` calls of `run`, CUDA events; each call
    gets what `prepare` (untimed, before its events) returns, or None."""
    times = []
    for _ in range(repeats):
        ready = prepare() if prepare else None
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        run(ready)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def measure(torch, fn, inputs, kw, grad_out, repeats: int):
    step(fn, inputs, kw, grad_out)  # compiles, autotunes
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step(fn, inputs, kw, grad_out)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    return median_ms(torch, lambda _: step(fn, inputs, kw, grad_out),
                     repeats), peak


def forward_ms(torch, fn, inputs, kw, repeats: int) -> float:
    """The median time of the forward alone."""
    fn(**inputs, **kw)
    return median_ms(torch, lambda _: fn(**inputs, **kw), repeats)


# Where fla refuses a form's backward (its Hopper guard on triton >= 3.4,
# < 3.7.1), its naive chunk reference (fla/ops/*/naive.py, pure torch in
# float32) stands in for the backward: (module, function).
NAIVE_BACKWARD = {
    "gdn": ("fla.ops.gated_delta_rule.naive", "naive_chunk_gated_delta_rule"),
    "simple_gla": ("fla.ops.simple_gla.naive", "naive_chunk_simple_gla"),
}


def forward_and_naive_backward_ms(torch, form, fla_fn, fla_extra, fla_in, kw,
                                  grad_out, repeats: int) -> float:
    """fla's forward kernel (no autograd) plus the backward of its naive
    chunk reference on the same inputs: the median of each, summed. The
    naive forward that builds each backward's graph is not timed."""
    plain = {n: (t.detach() if hasattr(t, "detach") else t)
             for n, t in fla_in.items()}
    with torch.no_grad():
        fwd = forward_ms(torch, lambda **a: fla_fn(**a, **fla_extra), plain,
                         kw, repeats)
    module, name = NAIVE_BACKWARD[form]
    naive = getattr(importlib.import_module(module), name)
    leaves = {n: plain[n].float().requires_grad_(True) for n in ("q", "k", "v")}

    def graph():
        q, k = leaves["q"], leaves["k"]
        if kw.get("use_qk_l2norm_in_kernel"):
            q = torch.nn.functional.normalize(q, p=2, dim=-1)
            k = torch.nn.functional.normalize(k, p=2, dim=-1)
        if form == "gdn":
            o, _ = naive(q, k, leaves["v"], plain["g"], plain["beta"],
                         chunk_size=64)
        else:
            o, _ = naive(q, k, leaves["v"], plain["g"], chunk_size=64)
        return o

    dO = grad_out.float()

    def built():
        o = graph()
        torch.cuda.synchronize()
        return o

    built().backward(dO)  # warms up
    return fwd + median_ms(torch, lambda o: o.backward(dO), repeats,
                           prepare=built)


def warm_fla(forms, shapes: str, seconds: float, popen=subprocess.Popen):
    """Runs fla's step of every case once, a process per form, all at once;
    stops what is still running after `seconds`. Returns a line per form."""
    env = dict(os.environ, FLA_CACHE_RESULTS="0", TRITON_CACHE_AUTOTUNING="0")
    procs = []
    for form in forms:
        cmd = [sys.executable, os.path.abspath(__file__), "--fla-only",
               "--forms", form, "--shapes", shapes]
        procs.append((form, popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)))
    deadline = time.monotonic() + seconds
    lines = []
    for form, proc in procs:
        try:
            _, err = proc.communicate(
                timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            lines.append(f"# fla warm-up {form}: stopped after {seconds:.0f} s")
            continue
        last = (err or "").strip().splitlines()[-1:] or [""]
        lines.append(f"# fla warm-up {form}: " + (
            "done" if proc.returncode == 0 else
            f"failed ({proc.returncode}): {last[0][:120]}"))
    return lines


def fla_only(args, torch) -> int:
    """fla's step once per case (a --warm-fla process): compiles its kernels."""
    failed = 0
    for form in args.forms.split(","):
        fla_mod, fla_name, _, fla_extra = cf.FORMS[form]
        fla_fn = getattr(importlib.import_module(fla_mod), fla_name)
        for shape in args.shapes.split(","):
            B, T, H, D = cf.SHAPES[shape]
            fla_in, _ = cf.make_inputs(form, B, T, H, D, torch.bfloat16,
                                       args.seed)
            for name in ("q", "k", "v"):
                fla_in[name] = fla_in[name].detach().requires_grad_(True)
            try:
                step(lambda **a: fla_fn(**a, **fla_extra), fla_in,
                     cf.common_kwargs(form), torch.randn_like(fla_in["v"]))
                torch.cuda.synchronize()
            except Exception as e:  # fla's Hopper guard, say: report, go on
                print(f"{form} {shape}: {type(e).__name__}: {e}",
                      file=sys.stderr)
                failed += 1
    return 1 if failed else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--forms", default="gdn,kda,gla,simple_gla,dplr")
    p.add_argument("--shapes", default=",".join(cf.SHAPES))
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tune", choices=["fast", "full"], default=None,
                   help="run `lina tune --mode MODE` and `lina tune --backward "
                        "--mode MODE` for each case's shape first")
    p.add_argument("--tune-timeout-s", type=float, default=300.0,
                   help="the most one `lina tune` may take (default 300)")
    p.add_argument("--warm-fla", type=float, default=0.0, metavar="SECONDS",
                   help="first compile fla's kernels for every case in "
                        "parallel processes, for at most SECONDS")
    p.add_argument("--lina-only", action="store_true",
                   help="time lina alone; fla's columns stay empty")
    p.add_argument("--fla-only", action="store_true",
                   help=argparse.SUPPRESS)  # a --warm-fla process
    args = p.parse_args(argv)
    args.dtype = "bf16"
    for form in args.forms.split(","):
        if form not in cf.FORMS:
            p.error(f"unknown form '{form}' (from {', '.join(cf.FORMS)})")
    for shape in args.shapes.split(","):
        if shape not in cf.SHAPES:
            p.error(f"unknown shape '{shape}' (from {', '.join(cf.SHAPES)})")
    if args.warm_fla < 0:
        p.error("--warm-fla takes seconds, at least 0")
    if args.lina_only and (args.fla_only or args.warm_fla > 0):
        p.error("--lina-only runs no fla: drop --warm-fla")
    cf.setup_imports(need_fla=not args.lina_only)
    import torch
    if args.fla_only:
        return fla_only(args, torch)
    if args.warm_fla > 0:
        for line in warm_fla(args.forms.split(","), args.shapes,
                             args.warm_fla):
            print(line, flush=True)
    import lina
    print("| form | shape | lina fwd ms | lina fwd+bwd ms | fla fwd+bwd ms | "
          "fla/lina | lina MiB | fla MiB | grad rel. diff |")
    print("|---|---|---|---|---|---|---|---|---|")
    for form in args.forms.split(","):
        fla_mod, fla_name, lina_name, fla_extra = cf.FORMS[form]
        fla_fn = None if args.lina_only else getattr(
            importlib.import_module(fla_mod), fla_name)
        lina_fn = getattr(lina, lina_name)
        for shape in args.shapes.split(","):
            B, T, H, D = cf.SHAPES[shape]
            fla_in, lina_in = cf.make_inputs(form, B, T, H, D, torch.bfloat16,
                                             args.seed)
            for d in (fla_in, lina_in):
                for name in ("q", "k", "v"):
                    d[name] = d[name].detach().requires_grad_(True)
            kw = cf.common_kwargs(form)
            grad_out = torch.randn_like(lina_in["v"])
            row = [form, shape]
            if args.tune:
                try:
                    tuned = [cf.tune_case(form, B, T, H, D, args, backward)
                             for backward in (False, True)]
                    print(f"# lina {form} {shape}: tuned forward {tuned[0]}; "
                          f"backward {tuned[1]}", flush=True)
                except Exception as e:  # report and run untuned
                    print(f"# lina {form} {shape}: tune failed: {e}",
                          flush=True)
            try:
                with torch.no_grad():
                    fwd = forward_ms(torch, lina_fn, lina_in, kw, args.repeats)
                ms, mem = measure(torch, lina_fn, lina_in, kw, grad_out,
                                  args.repeats)
                row += [f"{fwd:.3f}", f"{ms:.3f}"]
                # Seen even if fla then runs past a time limit.
                print(f"# lina {form} {shape}: forward {fwd:.3f} ms, forward "
                      f"+ backward {ms:.3f} ms, {mem / 2**20:.0f} MiB",
                      flush=True)
            except Exception as e:  # report and go on
                traceback.print_exc()
                print(f"| {form} | {shape} | error: {e} |")
                continue
            if args.lina_only:
                row += ["not run (--lina-only)", "", f"{mem / 2**20:.0f}",
                        "", ""]
                print("| " + " | ".join(row) + " |", flush=True)
                continue
            try:
                fms, fmem = measure(torch, lambda **a: fla_fn(**a, **fla_extra),
                                    fla_in, kw, grad_out, args.repeats)
                diff = max(
                    ((lina_in[n].grad.double() - fla_in[n].grad.double()).norm()
                     / fla_in[n].grad.double().norm()).item()
                    for n in ("q", "k", "v"))
                row += [f"{fms:.3f}", f"{fms / ms:.2f}", f"{mem / 2**20:.0f}",
                        f"{fmem / 2**20:.0f}", f"{diff:.1e}"]
            except Exception as e:
                msg = str(e).splitlines()[0][:80] if str(e) else type(e).__name__
                # fla refuses its backward here (its Hopper guard): its
                # kernel's forward and its naive reference's backward instead.
                stand_in, ratio = "", ""
                if form in NAIVE_BACKWARD:
                    try:
                        nms = forward_and_naive_backward_ms(
                            torch, form, fla_fn, fla_extra, fla_in, kw,
                            grad_out, args.repeats)
                        stand_in = f"; fla fwd + naive bwd {nms:.3f}"
                        ratio = f"{nms / ms:.2f} (naive bwd)"
                    except Exception as e2:  # report and go on
                        stand_in = f"; naive bwd: {type(e2).__name__}: {e2}"
                        stand_in = stand_in.splitlines()[0][:100]
                row += [f"fla: {msg}{stand_in}", ratio, f"{mem / 2**20:.0f}",
                        "", ""]
            print("| " + " | ".join(row) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
