"""What the GPU tests share: lina from this tree's python/ (not an installed
copy), torch and torch.nn.functional where torch imports (else None), and
whether there is a CUDA device and a liblina.so; `needs_gpu` skips a test
without both. The tests import it by name: unittest's discovery puts
test/python on sys.path.
"""
from __future__ import annotations

import sys
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import lina  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
    HAVE_CUDA = torch.cuda.is_available()
except ImportError:
    torch = F = None
    HAVE_CUDA = False

try:
    lina.library_path()
    HAVE_LIB = True
except lina.LinaError:
    HAVE_LIB = False

needs_gpu = unittest.skipUnless(HAVE_CUDA and HAVE_LIB,
                                "needs torch with CUDA and liblina.so")
