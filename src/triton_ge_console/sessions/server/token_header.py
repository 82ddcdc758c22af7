"""The header Triton's restricted APIs check: its own module so the CLI's parser can name it cheaply."""

from __future__ import annotations

# The header Triton's restricted APIs check when we expose a server (`--listen`).
TOKEN_HEADER = "x-ge-console-token"
