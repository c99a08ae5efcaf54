# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "lina"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit", "fuzz"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.lina_obj_root, "test")
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"

config.substitutions.append(("%lina_src", config.lina_src_root))
llvm_config.with_system_environment(["HOME", "TMPDIR", "ASAN_OPTIONS", "UBSAN_OPTIONS"])
llvm_config.use_default_substitutions()
llvm_config.add_tool_substitutions(["lina-opt", "lina", "lina-translate"], [config.lina_tools_dir])
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# `REQUIRES: nvrtc`: tests that compile kernels, where lina can load NVRTC
# (CUDA is optional on the build machine; scripts/install-deps.sh).
import subprocess
try:
    probe = subprocess.run(
        [os.path.join(config.lina_tools_dir, "lina"), "compile", "linear_attn",
         "--emit", "ptx", "--o", os.devnull],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    if probe.returncode == 0:
        config.available_features.add("nvrtc")
except (OSError, subprocess.TimeoutExpired):
    pass
