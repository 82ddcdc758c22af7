"""Words Triton and ge-console agree on, shared by every layer (a leaf: it imports nothing of the package)."""

from __future__ import annotations

# A config parameter a reload sets to a fresh value, so Triton loads new instances (backends ignore it).
RELOAD_PARAMETER = "ge_console_reload_id"
