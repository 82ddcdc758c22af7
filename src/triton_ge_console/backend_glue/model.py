"""Triton loads this as <backend-dir>/ge/model.py (and npu_ge/model.py): the logic lives in the package."""

from triton_ge_console.backend_glue.triton_model import TritonPythonModel

__all__ = ["TritonPythonModel"]
