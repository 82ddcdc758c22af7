"""Triton loads this as <backend-dir>/ge/model.py (and npu_ge/model.py): the logic lives in the package.

The Python backend stub ignores $PYTHONPATH, so its entries are put on sys.path before the package is
imported: the package found there (a checkout under development, CANN's pyacl) is the one that runs, as
in any other Python process started with that environment.
"""

import os
import sys

sys.path[1:1] = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]

from triton_ge_console.backend_glue.triton_model import TritonPythonModel  # noqa: E402

__all__ = ["TritonPythonModel"]
