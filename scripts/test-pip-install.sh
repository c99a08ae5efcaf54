#!/usr/bin/env bash
# Checks `pip install .`: installs the repository into a fresh venv, then, from
# outside the repository and without $LINA_LIBRARY or $PYTHONPATH, `import lina`
# must load the liblina.so installed with it and answer through the C API, and
# the eager-call extension's source and the C header it includes must be there.
# pip builds in build-pip (kept, so a second run rebuilds only what changed),
# with the system's cmake and ninja (--no-build-isolation: only
# scikit-build-core comes from PyPI) and the compiler the Release tree in
# build/ was configured with: where scripts/test.sh compiles through ccache,
# the library's objects are the Release tree's (same compiler name, flags and
# depth below the root, with CCACHE_BASEDIR), so this build takes about 40 s
# instead of 150 on two cores. Needs python3-venv. Run by scripts/test.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
cache="$root/build/CMakeCache.txt"
if [ -z "${CXX:-}" ] && [ -f "$cache" ]; then
  CXX=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$cache")
  [ -n "$CXX" ] && export CXX
fi

"$python" -m venv "$tmp/venv"
pip=("$tmp/venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install -q "scikit-build-core>=0.10"
CMAKE_BUILD_PARALLEL_LEVEL=${LINA_JOBS:-2} \
  "${pip[@]}" install -q --no-build-isolation \
    --config-settings=build-dir="$root/build-pip" "$root"

mkdir "$tmp/elsewhere"
cd "$tmp/elsewhere"
env -u LINA_LIBRARY -u PYTHONPATH "$tmp/venv/bin/python" - "$tmp/venv" <<'EOF'
import sys
from importlib.metadata import version
from pathlib import Path

import lina
from lina import _capi

venv = Path(sys.argv[1]).resolve()
package = Path(lina.__file__).resolve().parent
assert venv in package.parents, f"lina imported from {package}, not from {venv}"
library = lina.library_path()          # raises LinaError when not found
assert library == package / "_lib" / "liblina.so", f"loaded {library}"
spec = _capi.preset_spec("gdn", 128, 128, 16, 16, "bf16")
name, fields = lina.parse_spec_text(spec)
assert (name, fields["heads"], fields["dtype"]) == ("gdn", 16, "bf16"), spec
assert version("lina") == lina.__version__, (version("lina"), lina.__version__)
from lina import eager_extension
assert eager_extension.SOURCE.is_file(), eager_extension.SOURCE
assert eager_extension.include_dirs() == [str(package / "_include")], \
    eager_extension.include_dirs()
print(f"pip install: lina {version('lina')} loads {library} "
      f"(library {lina.library_version()})")
EOF
echo "pip install: passed in $((SECONDS - start)) s"
