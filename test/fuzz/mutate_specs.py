#!/usr/bin/env python3
"""Feeds mutated specs to lina-opt and lina; each must end in a diagnostic.

Every input (the hand-written corpus, plus mutants of the examples: truncated,
bytes flipped, numbers made huge or negative, tokens swapped, garbage spliced
in) must make the tool exit with status 0 (accepted) or 1/2 (rejected with an
'error:' line). A signal, an assertion or any other status fails the test.
Deterministic: the seed is fixed, so a failure reproduces.
"""
import os
import random
import subprocess
import sys
import tempfile

NUMBERS = ["0", "-1", "-9223372036854775808", "9223372036854775807",
           "99999999999999999999999", "1.5", "1e308", "nan", "0x7FF0000000000000"]
TOKENS = ["<", ">", ",", "=", "@", "%", "{", "}", "!lina.tile<0x0>", "bf16",
          "i1", "none", "dplr", "#lina.spec<>", "\"str\"", "[1, 2]", "unit"]


def mutants(text, rng, count):
    for _ in range(count):
        kind = rng.randrange(6)
        t = bytearray(text, "utf-8")
        if kind == 0 and t:  # truncate
            yield bytes(t[: rng.randrange(len(t))])
        elif kind == 1 and t:  # flip bytes
            for _ in range(rng.randrange(1, 6)):
                t[rng.randrange(len(t))] = rng.randrange(256)
            yield bytes(t)
        elif kind == 2:  # replace a number
            words = text.split(" ")
            idx = [i for i, w in enumerate(words) if any(c.isdigit() for c in w)]
            if idx:
                i = rng.choice(idx)
                trail = "," if words[i].endswith(",") else ">" if words[i].endswith(">") else ""
                words[i] = rng.choice(NUMBERS) + trail
            yield " ".join(words).encode()
        elif kind == 3:  # swap in a token
            words = text.split(" ")
            words[rng.randrange(len(words))] = rng.choice(TOKENS)
            yield " ".join(words).encode()
        elif kind == 4:  # splice garbage
            pos = rng.randrange(len(t) + 1)
            garbage = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
            yield bytes(t[:pos]) + garbage + bytes(t[pos:])
        else:  # duplicate a slice
            a = rng.randrange(len(t) + 1)
            b = rng.randrange(a, len(t) + 1)
            yield bytes(t[:b]) + bytes(t[a:b]) + bytes(t[b:])


def run(cmd, path):
    proc = subprocess.run(cmd + [path], capture_output=True, timeout=60)
    err = proc.stderr.decode("utf-8", "replace")
    if proc.returncode == 0:
        return None
    if proc.returncode in (1, 2) and "error:" in err:
        return None
    return f"{' '.join(cmd)} {path}: exit {proc.returncode}\n{err[-2000:]}"


def main():
    bindir, srcdir = sys.argv[1], sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    rng = random.Random(20261129)
    inputs = []
    corpus = os.path.join(srcdir, "test", "fuzz", "corpus")
    for name in sorted(os.listdir(corpus)):
        with open(os.path.join(corpus, name), "rb") as f:
            inputs.append((name, f.read()))
    examples = os.path.join(srcdir, "examples")
    for name in sorted(os.listdir(examples)):
        if name.endswith(".mlir"):
            with open(os.path.join(examples, name)) as f:
                text = f.read()
            for i, m in enumerate(mutants(text, rng, count)):
                inputs.append((f"{name}.mutant{i}", m))
    lina_opt = [os.path.join(bindir, "lina-opt")]
    tools = [lina_opt, lina_opt + ["-lina-specialize", "-lina-chunk=chunk-size=16"],
             [os.path.join(bindir, "lina"), "spec"]]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in inputs:
            path = os.path.join(tmp, "input.mlir")
            with open(path, "wb") as f:
                f.write(data)
            for tool in tools:
                problem = run(tool, path)
                if problem:
                    failures.append(f"[{name}] {problem}")
                    with open(os.path.join(tmp, "..", f"lina-fuzz-{len(failures)}.mlir"), "wb") as f:
                        f.write(data)
    print(f"{len(inputs)} inputs x {len(tools)} tools, {len(failures)} failures")
    for f in failures[:10]:
        print(f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
