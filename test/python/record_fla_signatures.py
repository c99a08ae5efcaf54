"""Records the signatures of fla's public functions that lina also exports,
into test/python/fla_signatures.json (read by test_fla_signatures.py).

    python3 test/python/record_fla_signatures.py PATH_TO_FLA [-o OUT.json]

PATH_TO_FLA is fla's wheel (e.g. fla_core-0.6.0-py3-none-any.whl), a
directory that holds the ``fla`` package (e.g. ``.fla``), or the package
directory itself. The source is read with ``ast``: neither torch nor triton
is needed, and nothing of fla is imported or run.

For every name that ``fla.ops`` exports and lina exports too, the table
holds fla's parameters in order: name, kind (as ``inspect.Parameter``
names them) and, where there is one, the default as source text. The
name's definition is found by following the imports from ``fla/ops/__init__.py``
through the submodules' ``__init__.py`` to the ``def`` (or to an alias such
as ``chunk_gdn = chunk_gated_delta_rule``). The table also lists every name
``fla.ops`` exports, so the test can tell when lina gains a function with an
fla namesake that the table lacks. Regenerate it when moving to another fla
release, or when lina gains such a function.
"""
from __future__ import annotations

import argparse
import ast
import json
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_OUT = HERE / "fla_signatures.json"


class Source:
    """fla's files by their path inside the package root ('fla/ops/...')."""

    def __init__(self, path: Path):
        self.path = path
        if path.is_file():
            self._zip = zipfile.ZipFile(path)
            self._names = set(self._zip.namelist())
            self._root = None
        else:
            self._zip = None
            root = path.parent if (path / "ops").is_dir() else path
            if not (root / "fla" / "ops").is_dir():
                raise SystemExit(f"{path}: no fla/ops in it (give fla's wheel "
                                 "or the directory that holds the fla package)")
            self._root = root

    def exists(self, rel: str) -> bool:
        if self._zip is not None:
            return rel in self._names
        return (self._root / rel).is_file()

    def read(self, rel: str) -> str:
        if self._zip is not None:
            return self._zip.read(rel).decode("utf-8")
        return (self._root / rel).read_text(encoding="utf-8")


def module_file(src: Source, module: str) -> str:
    """'fla.ops.kda' -> 'fla/ops/kda/__init__.py' or 'fla/ops/kda.py'."""
    base = module.replace(".", "/")
    for rel in (base + "/__init__.py", base + ".py"):
        if src.exists(rel):
            return rel
    raise LookupError(f"module {module} not found")


def absolute(module: str, rel_file: str, node: ast.ImportFrom) -> str:
    """The module an ImportFrom in ``module`` (defined in ``rel_file``)
    names."""
    if node.level == 0:
        return node.module
    package = module if rel_file.endswith("/__init__.py") else \
        module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return package + ("." + node.module if node.module else "")


def resolve(src: Source, module: str, name: str, seen=()) -> tuple:
    """(file, FunctionDef) that defines ``name`` as seen from ``module``,
    following unconditional top-level imports and aliases."""
    if (module, name) in seen:
        raise LookupError(f"import cycle at {module}.{name}")
    seen = seen + ((module, name),)
    rel = module_file(src, module)
    tree = ast.parse(src.read(rel), rel)
    found = None
    for node in tree.body:  # the last binding wins, as at import time
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.name == name:
            found = ("def", node)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) \
                and any(isinstance(t, ast.Name) and t.id == name
                        for t in node.targets):
            found = ("alias", node.value.id)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    found = ("import", absolute(module, rel, node), alias.name)
    if found is None:
        raise LookupError(f"{name} is not defined in {rel}")
    if found[0] == "def":
        return rel, found[1]
    if found[0] == "alias":
        return resolve(src, module, found[1], seen)
    return resolve(src, found[1], found[2], seen)


def exported(src: Source, module: str) -> dict[str, str]:
    """The public names of ``module`` (its __all__) and, for each, the
    submodule it is imported from."""
    rel = module_file(src, module)
    tree = ast.parse(src.read(rel), rel)
    names, origin = [], {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__"
                for t in node.targets):
            names = list(ast.literal_eval(node.value))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                origin[alias.asname or alias.name] = absolute(module, rel, node)
    return {n: origin.get(n, module) for n in names}


def parameters(fn: ast.FunctionDef) -> list[dict]:
    a = fn.args
    out = []

    def add(arg, kind, default=None):
        entry = {"name": arg.arg, "kind": kind}
        if default is not None:
            entry["default"] = ast.unparse(default)
        out.append(entry)

    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for i, (arg, default) in enumerate(zip(positional, defaults)):
        add(arg, "POSITIONAL_ONLY" if i < len(a.posonlyargs)
            else "POSITIONAL_OR_KEYWORD", default)
    if a.vararg:
        add(a.vararg, "VAR_POSITIONAL")
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        add(arg, "KEYWORD_ONLY", default)
    if a.kwarg:
        add(a.kwarg, "VAR_KEYWORD")
    return out


def fla_version(src: Source) -> str:
    tree = ast.parse(src.read("fla/__init__.py"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__version__"
                for t in node.targets):
            return ast.literal_eval(node.value)
    raise LookupError("fla/__init__.py has no __version__")


def lina_names() -> list[str]:
    sys.path.insert(0, str(REPO / "python"))
    import lina  # needs neither torch nor liblina.so
    return [n for n in lina.__all__ if callable(getattr(lina, n))]


def record(path: Path) -> dict:
    src = Source(path)
    ops = exported(src, "fla.ops")
    functions = {}
    for name in lina_names():
        if name not in ops:
            continue
        rel, fn = resolve(src, "fla.ops", name)
        functions[name] = {"module": ops[name], "defined_in": rel,
                           "parameters": parameters(fn)}
    return {
        "about": "fla's signatures of the functions lina exports under the "
                 "same names; regenerate with python3 test/python/"
                 "record_fla_signatures.py PATH_TO_FLA (see its docstring)",
        "fla_version": fla_version(src),
        "fla_ops_names": sorted(ops),
        "functions": functions,
    }


def dumps(table: dict) -> str:
    """JSON with one parameter per line, so a diff shows what changed."""
    lines = ["{"]
    for key in ("about", "fla_version"):
        lines.append(f" {json.dumps(key)}: {json.dumps(table[key])},")
    lines.append(' "fla_ops_names": [')
    lines.append(",\n".join(f"  {json.dumps(n)}" for n in table["fla_ops_names"]))
    lines.append(" ],")
    lines.append(' "functions": {')
    names = list(table["functions"])
    for i, name in enumerate(names):
        fn = table["functions"][name]
        lines.append(f"  {json.dumps(name)}: {{")
        lines.append(f'   "module": {json.dumps(fn["module"])},')
        lines.append(f'   "defined_in": {json.dumps(fn["defined_in"])},')
        lines.append('   "parameters": [')
        params = fn["parameters"]
        for j, p in enumerate(params):
            comma = "," if j + 1 < len(params) else ""
            lines.append(f"    {json.dumps(p)}{comma}")
        lines.append("   ]")
        lines.append("  }" + ("," if i + 1 < len(names) else ""))
    lines.append(" }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fla", type=Path,
                        help="fla's wheel, or a directory holding fla/")
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    table = record(args.fla)
    text = dumps(table)
    if str(args.output) == "-":
        sys.stdout.write(text)
    else:
        args.output.write_text(text)
        print(f"{args.output}: fla {table['fla_version']}, "
              f"{len(table['functions'])} functions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
