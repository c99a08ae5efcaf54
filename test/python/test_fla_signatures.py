"""lina's fla-named functions against fla's signatures (no GPU, no torch):

    python3 -m unittest discover -s test/python -p test_fla_signatures.py

fla_signatures.json holds fla's parameter lists (record_fla_signatures.py
made it from fla's source). For each function, fla's parameters must open
lina's in the same order, with the same names, kinds and defaults, so that
a call written for fla binds every argument, positional or keyword, to the
same parameter in lina. What lina adds comes after them and is keyword only
(or lina's **kwargs); where fla takes **kwargs, lina does too.
"""
from __future__ import annotations

import ast
import inspect
import json
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(HERE))

import lina  # noqa: E402  (needs neither torch nor liblina.so)

TABLE_PATH = HERE / "fla_signatures.json"
LINA_ONLY_KINDS = (inspect.Parameter.KEYWORD_ONLY,
                   inspect.Parameter.VAR_KEYWORD)


def load_table() -> dict:
    return json.loads(TABLE_PATH.read_text())


def same_default(source: str, value) -> bool:
    """fla's default (source text) against lina's (an object)."""
    try:
        expected = ast.literal_eval(source)
    except (ValueError, SyntaxError):
        return repr(value) == source
    return type(expected) is type(value) and expected == value


def describe(p: inspect.Parameter) -> str:
    text = f"{p.name} ({p.kind.name}"
    if p.default is not inspect.Parameter.empty:
        text += f", default {p.default!r}"
    return text + ")"


def mismatches(name: str, fn, fla_params: list[dict]) -> list[str]:
    """Every way ``fn``'s signature differs from fla's ``fla_params``."""
    out = []
    lina_params = list(inspect.signature(fn).parameters.values())
    fla_named = [p for p in fla_params if p["kind"] != "VAR_KEYWORD"]
    fla_var_keyword = len(fla_named) != len(fla_params)
    for i, want in enumerate(fla_named):
        where = f"{name}: parameter {i} ({want['name']})"
        if i >= len(lina_params):
            out.append(f"{where}: missing in lina")
            continue
        got = lina_params[i]
        if got.name != want["name"]:
            out.append(f"{where}: lina has {describe(got)} there")
            continue
        if got.kind.name != want["kind"]:
            out.append(f"{where}: kind {got.kind.name} in lina, "
                       f"{want['kind']} in fla")
        has_default = got.default is not inspect.Parameter.empty
        if "default" not in want and has_default:
            out.append(f"{where}: lina has default {got.default!r}, fla "
                       "has none")
        elif "default" in want and not has_default:
            out.append(f"{where}: lina has no default, fla has "
                       f"{want['default']}")
        elif "default" in want and not same_default(want["default"],
                                                    got.default):
            out.append(f"{where}: default {got.default!r} in lina, "
                       f"{want['default']} in fla")
    for got in lina_params[len(fla_named):]:
        if got.kind not in LINA_ONLY_KINDS:
            out.append(f"{name}: lina's {describe(got)} after fla's "
                       "parameters must be keyword only")
    if fla_var_keyword and not any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in lina_params):
        out.append(f"{name}: fla takes **kwargs, lina does not")
    return out


class FlaSignatureTest(unittest.TestCase):
    def test_every_function_matches_fla(self):
        table = load_table()
        problems = []
        for name, entry in table["functions"].items():
            fn = getattr(lina, name, None)
            if fn is None:
                problems.append(f"{name}: lina has no such function")
                continue
            problems += mismatches(name, fn, entry["parameters"])
        self.assertEqual(problems, [], "lina's signatures differ from fla "
                         f"{table['fla_version']}'s:\n" + "\n".join(problems))

    def test_every_fla_namesake_is_in_the_table(self):
        table = load_table()
        fla_names = set(table["fla_ops_names"])
        missing = sorted(n for n in lina.__all__
                         if n in fla_names and n not in table["functions"])
        self.assertEqual(missing, [], "regenerate fla_signatures.json with "
                         "test/python/record_fla_signatures.py")
        self.assertIn("fused_recurrent_gated_delta_rule", table["functions"])

    def test_the_check_finds_differences(self):
        fla = [{"name": "q", "kind": "POSITIONAL_OR_KEYWORD"},
               {"name": "g", "kind": "POSITIONAL_OR_KEYWORD",
                "default": "None"},
               {"name": "beta", "kind": "POSITIONAL_OR_KEYWORD",
                "default": "None"},
               {"name": "flag", "kind": "POSITIONAL_OR_KEYWORD",
                "default": "False"},
               {"name": "kwargs", "kind": "VAR_KEYWORD"}]

        def good(q, g=None, beta=None, flag=False, *, extra=1, **kwargs):
            pass

        def swapped(q, beta=None, g=None, flag=0, extra=1):
            pass

        self.assertEqual(mismatches("good", good, fla), [])
        self.assertEqual(mismatches("swapped", swapped, fla), [
            "swapped: parameter 1 (g): lina has beta (POSITIONAL_OR_KEYWORD, "
            "default None) there",
            "swapped: parameter 2 (beta): lina has g (POSITIONAL_OR_KEYWORD, "
            "default None) there",
            "swapped: parameter 3 (flag): default 0 in lina, False in fla",
            "swapped: lina's extra (POSITIONAL_OR_KEYWORD, default 1) after "
            "fla's parameters must be keyword only",
            "swapped: fla takes **kwargs, lina does not"])


class RecordedTableTest(unittest.TestCase):
    """The table is what the recorder makes of fla's source, where that
    source (the same release) is at hand: .fla/ (bench/README.md)."""

    def test_recorder_reproduces_the_table(self):
        fla = REPO / ".fla"
        init = fla / "fla" / "__init__.py"
        if not init.is_file():
            self.skipTest(f"{init} not found (fla's source)")
        import record_fla_signatures as rec
        table = load_table()
        version = rec.fla_version(rec.Source(fla))
        if version != table["fla_version"]:
            self.skipTest(f".fla holds fla {version}, the table "
                          f"{table['fla_version']}")
        self.assertEqual(rec.dumps(rec.record(fla)), TABLE_PATH.read_text())


if __name__ == "__main__":
    unittest.main()
