"""Field positions for errors found after parsing: text_format keeps none, so config text is scanned."""

from __future__ import annotations

from triton_ge_console.repository import pbtxt
from triton_ge_console.repository.validate import validate_config_text

TRICKY = """# a comment with { braces [ and "quotes"
name: "m" # trailing comment }
backend: 'python'
input < name: "a#b" data_type: TYPE_FP32 dims: [ 1 ] >;
input [
  { name: "second"; data_type: TYPE_FP32, dims: [ 2, 3 ] },
  {
    name: "third" "_part"
    data_type: TYPE_FP32
    dims: 4
  }
]
parameters: { key: "k" value: { string_value: "v" } }
"""


def test_field_sites_survive_comments_strings_and_every_delimiter() -> None:
    """Comments, # and braces inside strings, <> messages, ; and , separators, repeated blocks."""
    config = pbtxt.loads(TRICKY)
    assert [io.name for io in config.input] == ["a#b", "second", "third_part"]
    sites = pbtxt.field_sites(TRICKY)
    assert sites[(("name", 0),)] == pbtxt.FieldSite(2, 1, "m")
    assert sites[(("backend", 0),)].value == "python"
    assert sites[(("input", 0), ("name", 0))] == pbtxt.FieldSite(4, 9, "a#b")
    assert sites[(("input", 1), ("dims", 1))] == pbtxt.FieldSite(6, 54, "3")
    assert sites[(("input", 2), ("name", 0))] == pbtxt.FieldSite(8, 5, "third_part")
    assert sites[(("input", 2), ("dims", 0))] == pbtxt.FieldSite(10, 5, "4")


def test_locate_by_index_name_key_or_nearest_parent() -> None:
    """Indexes, quoted names (inputs) and keys (maps) resolve; an unwritten field falls back to its parent."""
    sites = pbtxt.field_sites(TRICKY)
    assert pbtxt.locate(sites, "input[1].dims[1]") == pbtxt.FieldSite(6, 54, "3")
    assert pbtxt.locate(sites, 'input["third_part"].data_type') == pbtxt.FieldSite(9, 5, "TYPE_FP32")
    assert pbtxt.locate(sites, 'parameters["k"].value.string_value') == pbtxt.FieldSite(13, 33, "v")
    assert pbtxt.locate(sites, "input[2].reshape.shape") == pbtxt.FieldSite(7, 3, None)
    assert pbtxt.locate(sites, "max_batch_size") is None
    assert pbtxt.locate(sites, 'parameters["absent"]') is None


def test_unfinished_text_keeps_what_was_found() -> None:
    """Scanning text cut short never raises."""
    sites = pbtxt.field_sites('name: "m"\ninput [ { name: "a" dims: [ 1,')
    assert sites[(("input", 0), ("name", 0))].line == 2


def test_problem_without_a_written_field_names_the_file_only() -> None:
    """An error about a field the text does not write has no line: the file alone is honest."""
    text = 'name: "m"\nbackend: "python"\ninput [ { name: "a" dims: [ 1 ] } ]\n'
    report = validate_config_text(text, "cfg.pbtxt")
    (problem,) = report.problems
    assert (problem.line, problem.field) == (3, "input[0].data_type")  # nearest written parent: input[0]
    report = validate_config_text('platform: "ensemble"\n', "e/config.pbtxt")
    (problem,) = report.errors
    assert problem.line == 1 and problem.field == "platform"
