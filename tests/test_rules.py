"""Import rules: heading matching, typed conversion of whole columns, rejections, loading."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from toolkit.errors import OptionError, SourceError
from toolkit.importing.rules import FieldRule, ImportRule, apply_rule, available_rules, load_rule

RULE = ImportRule(
    name="test-items",
    import_type="item",
    description="items for tests",
    register="damage",
    fields=(
        FieldRule("reference", "Reference", required=True),
        FieldRule("occupants", "Occupants", type="integer"),
        FieldRule("area", "Area m2", type="decimal", aliases=("Area",)),
        FieldRule("inspected", "Inspection Date", type="date"),
        FieldRule("habitable", "Habitable", type="boolean"),
        FieldRule("level", "Damage Level", type="lookup", choices=("None", "Minor", "Severe")),
        FieldRule("notes", "Notes", max_length=10),
        FieldRule("status", "Status", type="integer", default=1),
    ),
    matching_id="reference",
)


def _frame(rows: dict[str, list[object]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, dtype="string")
    frame.index = pd.RangeIndex(1, len(frame) + 1, name="row")
    return frame


def test_columns_are_converted_whole_and_headings_match_loosely() -> None:
    frame = _frame(
        {
            " reference ": ["A1", "A2", "A3"],
            "OCCUPANTS": ["3", " 04 ", None],
            "area": ["12.5", "7", ""],
            "Inspection_Date": ["2026-02-14", "14/02/2026", None],
            "Habitable": ["Yes", "n", "1"],
            "Damage Level": ["severe", "MINOR", None],
            "Extra": ["x", "y", "z"],
        }
    )
    prepared = apply_rule(RULE, frame)
    values = prepared.values
    assert prepared.rejections.empty
    assert values["reference"].tolist() == ["A1", "A2", "A3"]
    assert values["occupants"].tolist() == [3, 4, pd.NA]
    assert values["area"].tolist() == [12.5, 7.0, pd.NA]
    assert values["inspected"].tolist() == ["2026-02-14", "2026-02-14", pd.NA]
    assert values["habitable"].tolist() == [True, False, True]
    assert values["level"].tolist() == ["Severe", "Minor", pd.NA]
    assert prepared.ignored_columns == ["Extra"]
    assert prepared.column_of["area"] == "area"


def test_bad_cells_are_rejected_with_row_column_value_and_reason() -> None:
    frame = _frame(
        {
            "Reference": ["A1", "", "A3", "A4"],
            "Occupants": ["three", "2", "2.5", "1"],
            "Inspection Date": ["31/02/2026", None, None, None],
            "Habitable": ["maybe", None, None, None],
            "Damage Level": [None, None, "Gone", None],
            "Notes": [None, None, None, "far too long a note"],
        }
    )
    rejections = apply_rule(RULE, frame).rejections
    lines = sorted(rejections.itertuples(index=False, name=None))
    assert lines == [
        (1, "Habitable", "maybe", "is not a yes/no value (Yes, No, Y, N, 1, 0, True, False)"),
        (1, "Inspection Date", "31/02/2026", "is not a date (YYYY-MM-DD or DD/MM/YYYY)"),
        (1, "Occupants", "three", "is not a whole number"),
        (2, "Reference", "", "is required but empty"),
        (3, "Damage Level", "Gone", "is not one of: None, Minor, Severe"),
        (3, "Occupants", "2.5", "is not a whole number"),
        (4, "Notes", "far too long a note", "is longer than 10 characters"),
    ]


def test_null_marker_clears_and_empty_leaves_alone() -> None:
    frame = _frame(
        {"Reference": ["A1", "A2"], "Notes": ["[NULL]", ""], "Occupants": ["[NULL]", None]}
    )
    prepared = apply_rule(RULE, frame)
    assert prepared.values["notes"].isna().tolist() == [True, True]
    assert prepared.cleared["notes"].tolist() == [True, False]
    assert prepared.cleared["occupants"].tolist() == [True, False]
    assert prepared.cleared["reference"].tolist() == [False, False]


def test_a_missing_required_heading_is_fatal_and_lists_the_columns() -> None:
    with pytest.raises(SourceError) as caught:
        apply_rule(RULE, _frame({"Ref": ["A1"], "Notes": ["n"]}), path="damage.csv")
    assert str(caught.value) == (
        "damage.csv: rule 'test-items' needs the column(s) 'Reference', which the file does "
        "not have; its columns are: 'Ref', 'Notes'"
    )


def test_defaults_are_offered_for_inserts_only() -> None:
    assert RULE.defaults() == {"status": 1}
    prepared = apply_rule(RULE, _frame({"Reference": ["A1"]}))
    assert prepared.values["status"].isna().all()


def test_rule_definitions_are_checked() -> None:
    with pytest.raises(OptionError, match="importType 'case' is not one of: item, asset, user"):
        ImportRule(name="x", import_type="case", description="", fields=())  # type: ignore[arg-type]
    with pytest.raises(OptionError, match="an item rule needs its register"):
        ImportRule(name="x", import_type="item", description="", fields=())
    with pytest.raises(OptionError, match="a lookup field needs its choices"):
        FieldRule("level", "Level", type="lookup")


def test_user_rule_files_are_loaded_by_path_and_by_folder(tmp_path: Path) -> None:
    rule_file = tmp_path / "my_rule.py"
    rule_file.write_text(
        "from toolkit.importing.rules import FieldRule, ImportRule\n"
        "RULE = ImportRule(name='my-assets', import_type='asset', description='mine',\n"
        "                  fields=(FieldRule('name', 'Name', required=True),))\n"
    )
    by_path = load_rule(str(rule_file))
    assert by_path.name == "my-assets"
    assert by_path.source == str(rule_file)
    by_folder = available_rules([tmp_path])
    assert by_folder["my-assets"].describe()["fields"][0]["column"] == "Name"
    with pytest.raises(OptionError, match=r"importRule 'nope' is not one of: .*my-assets"):
        load_rule("nope", [tmp_path])


def test_a_broken_user_rule_file_names_itself(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("RULE = 1/0\n")
    with pytest.raises(OptionError, match=r"broken\.py: cannot load the rule: division by zero"):
        load_rule(str(broken))


def test_patterns_reject_values_in_the_wrong_form() -> None:
    rule = ImportRule(
        name="u",
        import_type="user",
        description="",
        fields=(
            FieldRule(
                "email",
                "Email",
                pattern=r"[^@\s]+@[^@\s]+\.[^@\s]+",
                pattern_reason="is not an email address",
            ),
        ),
    )
    prepared = apply_rule(rule, _frame({"Email": ["a@b.org", "nobody", None]}))
    assert prepared.rejections.to_dict("records") == [
        {"row": 2, "column": "Email", "value": "nobody", "reason": "is not an email address"}
    ]
    assert prepared.values["email"].isna().tolist() == [False, True, True]


def test_a_pattern_checks_the_cell_without_its_spaces_whether_or_not_they_are_kept() -> None:
    reason = "is not a 4-digit postcode"
    rule = ImportRule(
        name="p",
        import_type="asset",
        description="",
        fields=(
            FieldRule("trimmed", "a", pattern=r"\d{4}", pattern_reason=reason),
            FieldRule("kept", "b", trim=False, pattern=r"\d{4}", pattern_reason=reason),
        ),
    )
    frame = _frame({"a": [" 3350 ", "335", "3350"], "b": [" 3350 ", "3350", " 33 50"]})
    prepared = apply_rule(rule, frame)
    assert prepared.rejections[["row", "column", "value"]].to_dict("records") == [
        {"row": 2, "column": "a", "value": "335"},
        {"row": 3, "column": "b", "value": " 33 50"},
    ]
    assert prepared.values["trimmed"].tolist()[::2] == ["3350", "3350"]
    assert prepared.values["kept"].tolist()[:2] == [" 3350 ", "3350"]


def test_other_columns_can_be_kept_as_text_fields() -> None:
    rule = ImportRule(
        name="a",
        import_type="asset",
        description="",
        keep_other_columns=True,
        fields=(FieldRule("name", "name", required=True),),
    )
    prepared = apply_rule(rule, _frame({"name": ["Hall"], "asset_no": ["007"], "x": ["[NULL]"]}))
    assert prepared.values.iloc[0, :2].tolist() == ["Hall", "007"]
    assert prepared.values["x"].isna().all()
    assert prepared.cleared["x"].tolist() == [True]
    assert prepared.ignored_columns == []


def test_the_built_in_rules_cover_every_import_type() -> None:
    rules = available_rules()
    assert {name: rule.import_type for name, rule in rules.items()} == {
        "assets-csv": "asset",
        "damage-assessments": "item",
        "property-assets": "asset",
        "users": "user",
    }
    assert all(rule.source == "built-in" for rule in rules.values())
