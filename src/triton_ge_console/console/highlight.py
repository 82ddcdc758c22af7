"""config.pbtxt syntax highlighting (no Pygments lexer exists for protobuf text format)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text

_RULES = (
    (r"(?<![A-Za-z_\d.])-?\d+(?:\.\d+)?\b", "green"),  # numbers
    (r"\b[A-Za-z_][A-Za-z0-9_]*(?=\s*[:{\[])", "bold cyan"),  # field names
    (r"\b(?:TYPE|KIND|FORMAT)_[A-Z0-9_]+\b", "magenta"),  # enum constants
    (r"\b(?:true|false)\b", "magenta"),
    (r"\"(?:[^\"\\]|\\.)*\"", "yellow"),  # strings
    (r"#.*$", "dim italic"),  # comments
)


def highlight_pbtxt(source: str, error_lines: Iterable[int] = ()) -> Text:
    """Numbered, highlighted config text; lines with validation errors marked in red."""
    marked = set(error_lines)
    lines = source.splitlines() or [""]
    width = len(str(len(lines)))
    result = Text()
    for number, line in enumerate(lines, start=1):
        body = Text(line)
        for pattern, style in _RULES:
            body.highlight_regex(pattern, style)
        gutter_style = "bold white on red" if number in marked else "dim"
        result.append(f"{number:>{width}} ", style=gutter_style)
        result.append("│ ", style="dim")
        if number in marked:
            body.stylize("on #3a0000")
        result.append(body)
        result.append("\n")
    return result
