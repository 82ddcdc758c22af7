"""YAML with positions: safe_load semantics through SafeLoader nodes, and problems that name file:line:col."""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from typing import Any

import yaml

from triton_ge_console.display import printable
from triton_ge_console.errors import GeConsoleError
from triton_ge_console.triton_terms import INT64_MAX, INT64_MIN


@dataclass(frozen=True)
class SpecProblem:
    """One thing wrong in a spec, at a 1-based line and column (0 for the file as a whole)."""

    file: str
    line: int
    column: int
    field_path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        text = f"{where} {self.field_path}: {self.message}" if self.field_path else f"{where}: {self.message}"
        return printable(text)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "field": self.field_path,
            "message": self.message,
        }


class SpecError(GeConsoleError, ValueError):
    """A spec that cannot be used; `problems` lists every problem found, in file order."""

    def __init__(self, problems: list[SpecProblem]) -> None:
        self.problems = sorted(problems, key=lambda p: (p.file, p.line, p.column))
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass
class Problems:
    """Collects problems while a spec is read, so all of them are reported at once."""

    file: str
    items: list[SpecProblem] = field(default_factory=list)

    def add(self, node: yaml.Node | None, path: str, message: str) -> None:
        """Record a problem at node's position (or the file start when there is no node)."""
        line, column = (node.start_mark.line + 1, node.start_mark.column + 1) if node is not None else (1, 1)
        if len(message) > MAX_MESSAGE_CHARS:  # a safety net: values are quoted as excerpts already
            message = message[:MAX_MESSAGE_CHARS] + "…"
        path = path if len(path) <= MAX_MESSAGE_CHARS // 2 else path[: MAX_MESSAGE_CHARS // 2] + "…"
        self.items.append(SpecProblem(self.file, line, column, path, message))

    def raise_if_any(self) -> None:
        """Stop with every problem found so far."""
        if self.items:
            raise SpecError(self.items)


@dataclass
class Reader:
    """Typed access to YAML nodes: an accessor returns None (and records a problem) for a bad value."""

    loader: yaml.SafeLoader
    problems: Problems

    def value(self, node: yaml.Node) -> Any:
        """The Python value yaml.safe_load would give for this node."""
        return self.loader.construct_object(node, deep=True)

    def mapping(
        self, node: yaml.Node, path: str, allowed: tuple[str, ...] | None = None
    ) -> dict[str, tuple[yaml.Node, yaml.Node]] | None:
        """A mapping's entries by key (key node, value node); unknown or repeated keys are problems.

        A misspelled key is reported once and then read as the key it resembles (unless that key is there
        too), so one typo gives one error, not the errors that follow from the key seeming absent.
        """
        if not isinstance(node, yaml.MappingNode):
            self.problems.add(node, path, f"must be a mapping, not {describe(self.value(node))}")
            return None
        keys = [(str(self.value(key_node)), key_node, value_node) for key_node, value_node in node.value]
        present = {key for key, _, _ in keys}
        entries: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for key, key_node, value_node in keys:
            key_path = join(path, key)
            if key in entries:
                self.problems.add(
                    key_node, key_path, f"duplicate key (first at line {entries[key][0].start_mark.line + 1})"
                )
                continue
            if allowed is not None and key not in allowed:
                self.problems.add(key_node, key_path, unknown_key_message(key, allowed))
                meant = closest_key(key, allowed)
                if meant is not None and meant not in present:
                    entries[meant] = (key_node, value_node)
                continue
            entries[key] = (key_node, value_node)
        return entries

    def sequence(self, node: yaml.Node, path: str) -> list[yaml.Node] | None:
        """A list's item nodes."""
        if not isinstance(node, yaml.SequenceNode):
            self.problems.add(node, path, f"must be a list, not {describe(self.value(node))}")
            return None
        return list(node.value)

    def integer(
        self, node: yaml.Node, path: str, minimum: int | None = None, maximum: int | None = None
    ) -> int | None:
        """An integer in [minimum, maximum], and always within Triton's int64 config fields."""
        value = self.value(node)
        if isinstance(value, bool) or not isinstance(value, int):
            self.problems.add(node, path, f"must be an integer, not {describe(value)}")
            return None
        if minimum is not None and value < minimum:
            self.problems.add(node, path, f"must be >= {minimum}")
            return None
        if maximum is not None and value > maximum:
            self.problems.add(node, path, f"must be <= {maximum}{_field_width(maximum)}")
            return None
        if not INT64_MIN <= value <= INT64_MAX:
            self.problems.add(node, path, f"{short(value)} does not fit Triton's int64 field")
            return None
        return value

    def number(self, node: yaml.Node, path: str, positive: bool = False) -> float | None:
        """A real number (ints accepted)."""
        value = self.value(node)
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.problems.add(node, path, f"must be a number, not {describe(value)}")
            return None
        if not math.isfinite(value):
            self.problems.add(node, path, f"must be a finite number, not {value}")
            return None
        if positive and value <= 0:
            self.problems.add(node, path, "must be > 0")
            return None
        return float(value)

    def text(self, node: yaml.Node, path: str) -> str | None:
        """A non-empty string."""
        value = self.value(node)
        if not isinstance(value, str):
            self.problems.add(node, path, f"must be a string, not {describe(value)}")
            return None
        if not value.strip():
            self.problems.add(node, path, "must not be empty")
            return None
        return value

    def boolean(self, node: yaml.Node, path: str) -> bool | None:
        """true or false."""
        value = self.value(node)
        if not isinstance(value, bool):
            self.problems.add(node, path, f"must be true or false, not {describe(value)}")
            return None
        return value

    def scalar_text(self, node: yaml.Node, path: str) -> str | None:
        """A scalar (string, number or bool) as the string Triton's parameters carry."""
        if not isinstance(node, yaml.ScalarNode):
            self.problems.add(node, path, "must be a single value (string, number or true/false)")
            return None
        value = self.value(node)
        if value is None:
            self.problems.add(node, path, "must not be empty")
            return None
        if isinstance(value, bool):
            return "1" if value else "0"
        return str(value)

    def int_list(
        self, node: yaml.Node, path: str, minimum: int | None = None, maximum: int | None = None
    ) -> tuple[int, ...] | None:
        """A list of integers (a single integer is accepted as a list of one)."""
        if isinstance(node, yaml.ScalarNode):
            single = self.integer(node, path, minimum, maximum)
            return None if single is None else (single,)
        items = self.sequence(node, path)
        if items is None:
            return None
        values = [self.integer(item, f"{path}[{i}]", minimum, maximum) for i, item in enumerate(items)]
        return None if any(v is None for v in values) else tuple(v for v in values if v is not None)


INT32_MAX = 2**31 - 1
EXCERPT_CHARS = 40  # how much of an offending value a message quotes
MAX_MESSAGE_CHARS = 400


def _field_width(maximum: int) -> str:
    """Why a bound is what it is, when it is a protobuf field's width."""
    return " (Triton's int32 field)" if maximum == INT32_MAX else ""


def short(value: Any) -> Any:
    """A value as a message may quote it: a long string or number cut to an excerpt."""
    text = value if isinstance(value, str) else str(value) if isinstance(value, int) else None
    if text is None or len(text) <= EXCERPT_CHARS:
        return value
    return f"{text[:EXCERPT_CHARS]}… ({len(text)} chars)"


def join(path: str, key: str) -> str:
    """Field path of a key below path."""
    return f"{path}.{key}" if path else key


def describe(value: Any) -> str:
    """A short phrase for a wrongly typed value."""
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, str):
        return f"string {short(value)!r}"
    return f"{type(value).__name__} {short(value)!r}"


def closest_key(key: str, allowed: tuple[str, ...]) -> str | None:
    """The allowed key a misspelled one most likely meant, if any is close enough."""
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_key_message(key: str, allowed: tuple[str, ...]) -> str:
    """'unknown key' with the closest allowed key as a suggestion."""
    meant = closest_key(key, allowed)
    hint = f"; did you mean '{meant}'?" if meant else f"; allowed: {', '.join(allowed)}"
    return f"unknown key '{short(key)}'{hint}"


def suggest(value: str, choices: tuple[str, ...]) -> str:
    """A did-you-mean suffix for a value that is not one of choices."""
    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.5)
    return f"; did you mean '{close[0]}'?" if close else f"; choose one of {', '.join(choices)}"
