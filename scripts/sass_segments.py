#!/usr/bin/env python3
"""Sum Nsight Compute's per-instruction counters over barrier-delimited
segments of a kernel's SASS.

Input: the CSV of `ncu --page source --print-source sass --csv` (one row per
SASS instruction). A segment runs from one BAR.SYNC to the next, which in a
lina kernel is one step of the emitted chunk body (docs/perf-notes.md), so
the table says which ops' code the warps spend their issue slots and stall
samples on. Prints each segment's executed instructions, stall samples and
opcode mix, then the instructions with the most stall samples.
"""
import collections
import csv
import re
import sys


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def pick(header, *names):
    """The first column whose name contains one of names (case-insensitive)."""
    for name in names:
        for i, h in enumerate(header):
            if name.lower() in h.lower():
                return i
    return None


def main(path):
    rows = list(csv.reader(open(path, errors="replace")))
    start = next((i for i, r in enumerate(rows) if pick(r, "Source") is not None
                  and pick(r, "Address") is not None), None)
    if start is None:
        sys.exit("sass_segments: no source table in " + path + " (ncu said: " +
                 " ".join(r[0] for r in rows[:5] if r) + ")")
    header = rows[start]
    col_src = pick(header, "Source")
    col_addr = pick(header, "Address")
    col_exec = pick(header, "Warp-level Instructions Executed",
                    "Instructions Executed")
    col_stall = pick(header, "Warp Stall Sampling (All", "Sampling Data (All")
    if col_exec is None or col_stall is None:
        sys.exit("sass_segments: missing columns; header: " + ", ".join(header))
    segments, current = [], None
    hottest = []
    for r in rows[start + 1:]:
        if len(r) <= max(col_src, col_exec, col_stall):
            continue
        text = r[col_src].strip()
        op = re.sub(r"^@!?U?P\w+\s+", "", text).split(" ")[0]
        if current is None or op.startswith("BAR"):
            current = {"first": r[col_addr], "exec": 0.0, "stall": 0.0,
                       "ops": collections.Counter()}
            segments.append(current)
        executed, stalls = number(r[col_exec]), number(r[col_stall])
        current["exec"] += executed
        current["stall"] += stalls
        current["ops"][op.split(".")[0]] += executed
        hottest.append((stalls, r[col_addr], text))
    total_exec = sum(s["exec"] for s in segments) or 1.0
    total_stall = sum(s["stall"] for s in segments) or 1.0
    print(f"{'segment':>10} {'instr %':>8} {'stall %':>8}  top opcodes (executed)")
    for s in segments:
        if s["exec"] == 0 and s["stall"] == 0:
            continue
        mix = ", ".join(f"{op} {100 * n / s['exec']:.0f}%"
                        for op, n in s["ops"].most_common(6) if s["exec"])
        print(f"{s['first']:>10} {100 * s['exec'] / total_exec:8.1f} "
              f"{100 * s['stall'] / total_stall:8.1f}  {mix}")
    print("hottest instructions (stall samples %):")
    for stalls, addr, text in sorted(hottest, reverse=True)[:15]:
        print(f"  {100 * stalls / total_stall:5.1f}  {addr}  {text}")


if __name__ == "__main__":
    main(sys.argv[1])
