"""Forward + backward of lina's fla-named functions against fla 0.6.0's on
the same inputs, in one process on one GPU: the median time of a
training step's attention call (forward, then backward of <dO, o>), its
peak memory, and where fla runs, the ratio fla / lina. Where fla refuses
(its Hopper guard on some triton versions) the row says so.

    python3 bench/train_fla.py [--forms gdn,kda] [--shapes B4_T2048_H16_D128]
        [--tune fast|full]

With --tune, `lina tune` runs for each case's shape first, for the forward
and for the backward (`--backward`), in lina's cache ($LINA_CACHE_DIR), so
that the lina call runs both tuned; a line before the row says what each
tune picked.

fla and einops come from .fla/ and .whl/ as for bench/compare_fla.py,
whose shapes and inputs this uses.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import traceback

import compare_fla as cf


def step(fn, inputs: dict, kw: dict, grad_out):
    """One forward and backward; the inputs' .grad are cleared first."""
    for t in inputs.values():
        if t.requires_grad:
            t.grad = None
    o, _ = fn(**inputs, **kw)
    o.backward(grad_out)


def measure(torch, fn, inputs, kw, grad_out, repeats: int):
    step(fn, inputs, kw, grad_out)  # compiles, autotunes
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step(fn, inputs, kw, grad_out)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        step(fn, inputs, kw, grad_out)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2], peak


def forward_ms(torch, fn, inputs, kw, repeats: int) -> float:
    """The median time of the forward alone."""
    fn(**inputs, **kw)
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn(**inputs, **kw)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


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
    args = p.parse_args(argv)
    args.dtype = "bf16"
    cf.setup_imports()
    import torch
    import lina
    print("| form | shape | lina fwd ms | lina fwd+bwd ms | fla fwd+bwd ms | "
          "fla/lina | lina MiB | fla MiB | grad rel. diff |")
    print("|---|---|---|---|---|---|---|---|---|")
    for form in args.forms.split(","):
        fla_mod, fla_name, lina_name, fla_extra = cf.FORMS[form]
        fla_fn = getattr(importlib.import_module(fla_mod), fla_name)
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
                row += [f"fla: {msg}", "", f"{mem / 2**20:.0f}", "", ""]
            print("| " + " | ".join(row) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
