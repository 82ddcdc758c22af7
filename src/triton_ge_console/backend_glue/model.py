"""Triton loads this as <backend-dir>/ge/model.py (and npu_ge/model.py): the logic lives in the package.

The stub ignores $PYTHONPATH; it is applied before the package is imported, so the package itself (and
CANN's pyacl) can come from there.
"""

import os
import sys

sys.path[1:1] = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]

from triton_ge_console.backend_glue.triton_model import TritonPythonModel  # noqa: E402

__all__ = ["TritonPythonModel"]
