"""Formula-looking cells are neutralised; numbers and ordinary text are not touched."""

from __future__ import annotations

import pandas as pd

from toolkit.safe_output import neutralise_formulas, safe_frame


def test_formula_cells_get_an_apostrophe_and_numbers_do_not() -> None:
    column = pd.Series(
        [
            '=HYPERLINK("http://x")',
            "+1+2",
            "-2+3",
            "@SUM(A1)",
            "\tx",
            "-37.56",
            "+61",
            "1e-5",
            "plain",
            None,
            "a=b",
        ],
        dtype="string",
    )
    assert neutralise_formulas(column).tolist() == [
        '\'=HYPERLINK("http://x")',
        "'+1+2",
        "'-2+3",
        "'@SUM(A1)",
        "'\tx",
        "-37.56",
        "+61",
        "1e-5",
        "plain",
        pd.NA,
        "a=b",
    ]


def test_non_text_columns_are_returned_as_they_are() -> None:
    frame = pd.DataFrame({"n": [-1, 2], "t": ["=1", "ok"]})
    safe = safe_frame(frame)
    assert safe["n"].tolist() == [-1, 2]
    assert safe["t"].tolist() == ["'=1", "ok"]
