#!/usr/bin/env python3
"""lina's context parallelism, forward pass: one long sequence on one GPU
against the same sequence split over N GPUs (lina.context_parallel), time
per forward, the speedup, peak memory per GPU, and the N-GPU output against
the one-GPU output.

    python3 bench/context_parallel.py                  # gdn, kda; 1 GPU, then 2, 4, 8 as there are
    python3 bench/context_parallel.py --gpus 2 --tokens 262144
    python3 bench/context_parallel.py --same-device 2  # one GPU: 2 ranks share it over Gloo
    python3 bench/context_parallel.py --markdown out.md

Default shape: 1 x 1,048,576 tokens x 16 heads x 128 (K = V), bf16, q and k
normalised in the kernel (use_qk_l2norm_in_kernel=True), gates and betas
float32. Every configuration runs in processes of its own (spawned, one a
GPU; no torchrun): the one-GPU baseline calls the function on the whole
sequence; N GPUs talk over NCCL, rank r on cuda:r with tokens
[T r / N, T (r + 1) / N), its context built from those bounds (the same
kernels as the baseline's, which takes no cu_seqlens). Each rank makes its
own stretch of the inputs from seeded generators, a block of 65,536 tokens
a seed, so that every configuration sees the same values without the
whole sequence on every GPU (the GPUs must be of one model: CUDA's random
numbers follow the device's launch shape).

Timing: warm-up calls first (the first one's wall time, the compile
included, is the "1st s" column), then per forward the CUDA-event time of
each rank after a barrier; a forward takes its slowest rank's time, and the
table gives the median. Peak memory is torch.cuda.max_memory_allocated from
the inputs' creation on, the busiest GPU's. The check: the baseline's
output and final state are saved to a temporary folder (4 GiB of output at
the default shape) and each rank compares its stretch, ||o_N - o_1|| /
||o_1|| over the whole sequence, over the 1024 tokens after each cut
(where a wrong handoff shows: the state it carries fades within some
hundreds of tokens) and for the final state; --no-check skips it.

--same-device N runs N ranks on cuda:0 over Gloo (NCCL refuses two ranks on
one GPU): a functional check on a one-GPU machine. Its ranks share one GPU,
so its time measures no speedup, and its speedup column says so.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# form: the lina function
FORMS = {"gdn": "chunk_gated_delta_rule", "kda": "chunk_kda"}
BLOCK = 1 << 16  # tokens a seed (see the docstring)
# Tokens after each cut compared on their own: a wrong handoff shows there
# (the state it carries fades within some hundreds of tokens), and would
# be lost in a whole stretch's norm.
CUT_WINDOW = 1024
GIB = float(1 << 30)


# --------------------------------------------------------------------------
# One rank (or the baseline's one process)
# --------------------------------------------------------------------------

def make_inputs(form, t0, t1, H, D, seed, device):
    """Tokens [t0, t1) of the form's inputs, built block by block: block b
    is drawn from its own generator, so that any stretch holds the same
    values as the whole sequence there."""
    import torch
    import torch.nn.functional as F
    n = t1 - t0
    bf16, f32 = torch.bfloat16, torch.float32
    shapes = {"q": ((H, D), bf16), "k": ((H, D), bf16), "v": ((H, D), bf16),
              "g": ((H,) if form == "gdn" else (H, D), f32),
              "beta": ((H,), f32)}
    x = {name: torch.empty((1, n) + shape, dtype=dtype, device=device)
         for name, (shape, dtype) in shapes.items()}
    for block in range(t0 // BLOCK, (t1 - 1) // BLOCK + 1):
        b0 = block * BLOCK
        gen = torch.Generator(device=device)
        gen.manual_seed(seed * 1_000_003 + 7919 * list(FORMS).index(form)
                        + block)
        drawn = {}
        for name, (shape, dtype) in shapes.items():
            drawn[name] = torch.randn((1, BLOCK) + shape, dtype=dtype,
                                      device=device, generator=gen)
        # Per-token log decays near -0.02: the state carries far past a
        # rank's cut, so that the check sees a wrong handoff (the kernels'
        # time does not depend on the values).
        drawn["g"] = F.logsigmoid(drawn["g"] + 4)
        if form == "kda":
            drawn["g"] = drawn["g"].clamp(-5, 0)
        drawn["beta"] = drawn["beta"].sigmoid()
        lo, hi = max(t0, b0), min(t1, b0 + BLOCK)
        for name, t in drawn.items():
            x[name][:, lo - t0:hi - t0] = t[:, lo - b0:hi - b0]
    return x


def squared_difference(o, ref, device, step=1 << 15):
    """(sum (o - ref)^2, sum ref^2) in float64, ``ref`` on the host (the
    baseline's, read from its file), a slice of tokens at a time."""
    import torch
    err = norm = 0.0
    for s in range(0, o.shape[1], step):
        a = o[:, s:s + step].float()
        b = ref[:, s:s + step].to(device).float()
        err += (a - b).pow(2).sum(dtype=torch.float64).item()
        norm += b.pow(2).sum(dtype=torch.float64).item()
    return err, norm


def run_form(form, rank, world, device, cfg, barrier):
    import torch
    import lina
    from lina.context_parallel import build_cp_context
    T, H, D = cfg["tokens"], cfg["heads"], cfg["dim"]
    t0, t1 = T * rank // world, T * (rank + 1) // world
    torch.cuda.empty_cache()
    x = make_inputs(form, t0, t1, H, D, cfg["seed"], device)
    torch.cuda.synchronize(device)
    # From here on: the inputs (already held) and what the calls add.
    torch.cuda.reset_peak_memory_stats(device)
    kw = dict(use_qk_l2norm_in_kernel=True, output_final_state=True)
    if world > 1:
        kw["cp_context"] = build_cp_context(bounds=(t0, t1))
    fn = getattr(lina, FORMS[form])
    out = {"bounds": [t0, t1]}
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    with torch.no_grad():
        barrier()
        began = time.perf_counter()
        o, ht = fn(**x, **kw)
        torch.cuda.synchronize(device)
        out["first_s"] = time.perf_counter() - began
        del o, ht
        for _ in range(cfg["warmup"]):
            fn(**x, **kw)
        times = []
        for _ in range(cfg["iters"]):
            torch.cuda.synchronize(device)
            barrier()
            start.record()
            o, ht = fn(**x, **kw)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
            del o, ht
        out["times_ms"] = times
        out["peak_bytes"] = torch.cuda.max_memory_allocated(device)
        o, ht = fn(**x, **kw)
        del x
        out["finite"] = bool(torch.isfinite(o).all().item()
                             and torch.isfinite(ht).all().item())
        saved = os.path.join(cfg["dir"], f"baseline-{form}.pt")
        if world == 1 and cfg["check"]:
            torch.save({"o": o.cpu(), "ht": ht.cpu()}, saved)
        elif cfg["check"] and os.path.exists(saved):
            ref = _load(saved)
            out["o_err"], out["o_norm"] = squared_difference(
                o, ref["o"][:, t0:t1], device)
            if rank > 0:
                head = min(CUT_WINDOW, t1 - t0)
                out["cut_err"], out["cut_norm"] = squared_difference(
                    o[:, :head], ref["o"][:, t0:t0 + head], device)
            if rank == world - 1:
                out["ht_err"], out["ht_norm"] = squared_difference(
                    ht.reshape(1, -1), ref["ht"].reshape(1, -1), device)
    return out


def _load(path):
    """The baseline's file, mapped rather than read where torch can (a rank
    reads only its stretch of the output)."""
    import torch
    try:
        return torch.load(path, mmap=True, weights_only=True)
    except TypeError:  # a torch without mmap=
        return torch.load(path)


def worker(rank, world, port, backend, devices, cfg):
    import torch
    device = torch.device(devices[rank])
    torch.cuda.set_device(device)
    if world > 1:
        import torch.distributed as dist
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        # Every rank is on this host: Gloo over the loopback device.
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        dist.init_process_group(
            backend, rank=rank, world_size=world,
            timeout=datetime.timedelta(seconds=cfg["timeout_s"]))

        def barrier():
            if backend == "nccl":
                dist.barrier(device_ids=[device.index])
            else:
                dist.barrier()
    else:
        def barrier():
            pass
    try:
        results = {form: run_form(form, rank, world, device, cfg, barrier)
                   for form in cfg["forms"]}
        Path(cfg["dir"], f"{cfg['tag']}-rank{rank}.json").write_text(
            json.dumps(results))
    finally:
        if world > 1:
            dist.destroy_process_group()


# --------------------------------------------------------------------------
# The configurations, one after another
# --------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_config(tag, world, backend, devices, cfg):
    """Every rank's results of one configuration; raises what a rank
    raised, or a TimeoutError past cfg['timeout_s']."""
    import torch.multiprocessing as mp
    cfg = dict(cfg, tag=tag)
    context = mp.spawn(worker, args=(world, free_port(), backend, devices,
                                     cfg),
                       nprocs=world, join=False)
    deadline = time.monotonic() + cfg["timeout_s"]
    while not context.join(timeout=5):
        if time.monotonic() > deadline:
            for p in context.processes:
                if p.is_alive():
                    p.kill()
            for p in context.processes:
                p.join()
            raise TimeoutError(f"not done after {cfg['timeout_s']:.0f} s "
                               "(--timeout-s)")
    return [json.loads(Path(cfg["dir"], f"{tag}-rank{r}.json").read_text())
            for r in range(world)]


def summarize(form, label, world, backend, ranks, base_ms, shared, tol):
    """One table row from every rank's results of ``form``."""
    parts = [r[form] for r in ranks]
    # A forward takes as long as its slowest rank (they start together).
    per_forward = [max(ts) for ts in zip(*(p["times_ms"] for p in parts))]
    row = {"form": form, "config": label, "world": world, "backend": backend,
           "ms": statistics.median(per_forward),
           "peak_gib": max(p["peak_bytes"] for p in parts) / GIB,
           "first_s": max(p["first_s"] for p in parts), "status": "ok"}
    if world > 1 and not shared and base_ms:
        row["speedup"] = base_ms / row["ms"]
    def rel(err, norm):
        return (err / norm) ** 0.5 if norm > 0 else float("inf")

    if all("o_err" in p for p in parts):
        row["rel_o"] = rel(sum(p["o_err"] for p in parts),
                           sum(p["o_norm"] for p in parts))
        row["rel_cut"] = rel(sum(p["cut_err"] for p in parts[1:]),
                             sum(p["cut_norm"] for p in parts[1:]))
        row["rel_ht"] = rel(parts[-1]["ht_err"], parts[-1]["ht_norm"])
    worst = max(row.get(k, 0.0) for k in ("rel_o", "rel_cut", "rel_ht"))
    if not all(p["finite"] for p in parts):
        row.update(status="FAILED", message="NaN or Inf in the output or "
                   "the final state")
    elif worst > tol:
        row.update(status="MISMATCH", message="relative difference from "
                   f"the one-GPU output above --tol {tol}")
    return row


# --------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------

HEADER = ["form", "GPUs", "backend", "ms", "speedup", "peak GiB/GPU",
          "rel diff o / cuts / state", "1st s", "status"]


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def markdown(rows, meta) -> str:
    lines = [
        f"### lina context parallel, forward, bf16 — {meta['date']}",
        "",
        f"GPU: {meta['gpu']} x {meta['gpus_found']}; lina: "
        f"{meta['lina_build']}; torch {meta['torch']}.",
        f"One sequence of {meta['tokens']} tokens, {meta['heads']} heads, "
        f"K = V = {meta['dim']}. ms: median over {meta['iters']} forwards "
        f"(after {meta['warmup']} warm-up calls) of the slowest rank's "
        "CUDA-event time; speedup: the one-GPU ms over the N-GPU ms; peak: "
        "torch.cuda.max_memory_allocated of the busiest GPU, inputs "
        "included; rel diff: against the one-GPU output, over the whole "
        f"output, over the {CUT_WINDOW} tokens after each cut, and of the "
        "final state.",
        "",
        f"    {meta['command']}",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    for r in rows:
        if "ms" not in r:
            cells = [r["form"], r["config"], r.get("backend", "-")] + \
                ["-"] * 5 + [r["status"]]
        else:
            rel = ("-" if r.get("rel_o") is None else
                   f"{r['rel_o']:.2e} / {r['rel_cut']:.2e} / "
                   f"{r['rel_ht']:.2e}")
            speed = (fmt(r.get("speedup"), ".2f") if not r.get("shared")
                     else "none (one GPU shared)")
            cells = [r["form"], r["config"], r["backend"], f"{r['ms']:.2f}",
                     speed, f"{r['peak_gib']:.1f}", rel,
                     f"{r['first_s']:.1f}", r["status"]]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [f"- {r['form']}, {r['config']}: {r['status']}: {r['message']}"
             for r in rows if r.get("message")] + \
        [f"- {n}" for n in meta["notes"]]
    if notes:
        lines += [""] + notes
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=1 << 20,
                   help="sequence length (default 1048576)")
    p.add_argument("--heads", type=int, default=16, help="default 16")
    p.add_argument("--dim", type=int, default=128,
                   help="key and value dimension (default 128)")
    p.add_argument("--forms", default="gdn,kda",
                   help=f"comma-separated, from {', '.join(FORMS)} "
                        "(default gdn,kda)")
    p.add_argument("--gpus", default="2,4,8",
                   help="GPU counts to split over, one rank a GPU over "
                        "NCCL; those above the GPUs found are not run "
                        "(default 2,4,8)")
    p.add_argument("--same-device", type=int, default=0, metavar="N",
                   help="also run N ranks on cuda:0 over Gloo: a "
                        "functional check on one GPU, no speedup measured")
    p.add_argument("--warmup", type=int, default=3,
                   help="untimed calls before timing (default 3)")
    p.add_argument("--iters", type=int, default=10,
                   help="timed forwards; the median is reported (default 10)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tol", type=float, default=0.02,
                   help="rel diff above this is MISMATCH (default 0.02)")
    p.add_argument("--no-check", action="store_true",
                   help="skip the comparison with the one-GPU output (and "
                        "saving that output)")
    p.add_argument("--timeout-s", type=float, default=300.0,
                   help="the most one configuration may take (default 300)")
    p.add_argument("--workdir", default=None,
                   help="where the baseline's output is kept during the run "
                        "(default: the system's temporary folder)")
    p.add_argument("--markdown", default=None,
                   help="also write the table here")
    args = p.parse_args(argv)
    forms = [f for f in args.forms.split(",") if f]
    bad = [f for f in forms if f not in FORMS]
    if bad or not forms:
        p.error(f"unknown form {bad[0]!r}; choose from {', '.join(FORMS)}"
                if bad else "--forms is empty")
    try:
        gpus = sorted({int(n) for n in args.gpus.split(",") if n.strip()})
    except ValueError:
        p.error(f"--gpus must be comma-separated integers, got {args.gpus!r}")
    if any(n < 2 for n in gpus):
        p.error("--gpus counts must be 2 or more (one GPU is the baseline, "
                "always run)")
    if args.same_device and args.same_device < 2:
        p.error("--same-device needs 2 or more ranks")
    for name in ("tokens", "heads", "dim", "iters"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if args.warmup < 0:
        p.error("--warmup must be 0 or more")
    most = max(gpus + [args.same_device])
    if args.tokens < most:
        p.error(f"--tokens {args.tokens} leaves a rank of {most} without any")
    args.forms, args.gpus = forms, gpus
    return args


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    try:
        import torch
        import torch.distributed as dist
        import torch.multiprocessing  # noqa: F401
    except ImportError as e:
        sys.exit(f"context_parallel: needs torch with CUDA ({e})")
    if not torch.cuda.is_available():
        sys.exit("context_parallel: no CUDA device; this benchmark needs at "
                 "least one GPU (--help for the options)")
    import lina
    from compare_fla import build_info
    try:
        library = lina.library_path()
    except lina.LinaError as e:
        sys.exit("context_parallel: " + " ".join(str(e).split()))
    # NVLink multicast buys nothing for an all_gather of a few MB, and the
    # shared GPU hosts keep it off; the ranks inherit these.
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

    found = torch.cuda.device_count()
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC"),
        "gpu": torch.cuda.get_device_name(0), "gpus_found": found,
        "torch": torch.__version__, "lina_build": build_info(),
        "command": "python3 bench/context_parallel.py " + shlex.join(argv),
        "tokens": args.tokens, "heads": args.heads, "dim": args.dim,
        "iters": args.iters, "warmup": args.warmup, "notes": [],
    }
    print(f"{meta['gpu']} x {found}; torch {meta['torch']}; lina {library} "
          f"({meta['lina_build']})", flush=True)

    configs = [("1 GPU", 1, "-", ["cuda:0"], False)]
    for n in args.gpus:
        if n > found:
            meta["notes"].append(f"{n} GPUs: not run, {found} found")
        elif not (dist.is_available() and dist.is_nccl_available()):
            meta["notes"].append(f"{n} GPUs: not run, torch.distributed "
                                 "has no NCCL here")
        else:
            configs.append((f"{n} GPUs", n, "nccl",
                            [f"cuda:{r}" for r in range(n)], False))
    if args.same_device:
        n = args.same_device
        if dist.is_available() and dist.is_gloo_available():
            configs.append((f"{n} ranks on 1 GPU", n, "gloo",
                            ["cuda:0"] * n, True))
            meta["notes"].append(
                f"{n} ranks on 1 GPU: a functional check; the ranks share "
                "one GPU, so their time measures no speedup")
        else:
            meta["notes"].append(f"{n} ranks on 1 GPU: not run, "
                                 "torch.distributed has no Gloo here")

    workdir = tempfile.mkdtemp(prefix="lina-cp-bench-", dir=args.workdir)
    # The baseline saves its output only where a later configuration
    # compares with it.
    cfg = {"forms": args.forms, "tokens": args.tokens, "heads": args.heads,
           "dim": args.dim, "seed": args.seed, "warmup": args.warmup,
           "iters": args.iters, "dir": workdir, "timeout_s": args.timeout_s,
           "check": not args.no_check and len(configs) > 1}
    rows, base_ms = [], {}
    try:
        for i, (label, world, backend, devices, shared) in enumerate(configs):
            t0 = time.time()
            try:
                ranks = run_config(f"config{i}", world, backend, devices, cfg)
            except Exception as e:  # noqa: BLE001 - reported, then the next
                print(f"{label}: {type(e).__name__}: {e}", file=sys.stderr,
                      flush=True)
                last = (str(e).strip().splitlines() or [""])[-1]
                for form in args.forms:
                    rows.append({"form": form, "config": label,
                                 "backend": backend, "status": "FAILED",
                                 "message": f"{type(e).__name__}: "
                                            f"{last}"[:300]})
                continue
            for form in args.forms:
                row = summarize(form, label, world, backend, ranks,
                                base_ms.get(form), shared, args.tol)
                row["shared"] = shared
                if world == 1:
                    base_ms[form] = row["ms"]
                rows.append(row)
                print(f"{form}, {label}: {row['status']} {row['ms']:.2f} ms "
                      f"peak {row['peak_gib']:.1f} GiB "
                      f"rel {fmt(row.get('rel_o'), '.2e')} "
                      f"({time.time() - t0:.0f} s)", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    table = markdown(rows, meta)
    print("\n" + table, end="")
    if args.markdown:
        Path(args.markdown).write_text(table)
        print(f"wrote {args.markdown}")
    return 1 if any(r["status"] in ("FAILED", "MISMATCH") for r in rows) \
        else 0


if __name__ == "__main__":
    sys.exit(main())
