"""The synthetic workload generator and the committed sample data it made."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyogrio
import pytest
import shapely
from click.testing import CliRunner
from pyproj import Transformer
from rapidfuzz.distance import Levenshtein

from toolkit.cli import cli
from toolkit.errors import OptionError, ToolkitError
from toolkit.sample.columns import assemble
from toolkit.sample.extras import ASSET_COLUMNS, USER_COLUMNS
from toolkit.sample.generate import GenerateResult, generate
from toolkit.sample.items import ITEM_COLUMNS, KINDS, TRUTH_COLUMNS
from toolkit.sample.parcels import PARCEL_FIELDS
from toolkit.sample.vocab import STREET_NAMES, STREET_TYPES

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data"
ASSETS, ITEMS = 1200, 600
TO_MGA = Transformer.from_crs("EPSG:4326", "EPSG:7855", always_xy=True)


def read_csv(path: Path) -> pd.DataFrame:
    # Everything as text, empty fields as "", so values are compared as written.
    return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> GenerateResult:
    return generate(tmp_path_factory.mktemp("workload"), assets=ASSETS, items=ITEMS, seed=7)


@pytest.fixture(scope="module")
def parcels(workload: GenerateResult) -> pd.DataFrame:
    return pyogrio.read_dataframe(workload.files["parcels"])


@pytest.fixture(scope="module")
def rows(workload: GenerateResult, parcels: pd.DataFrame) -> pd.DataFrame:
    """Item rows beside their truth and their true parcel's attributes and geometry."""
    items = read_csv(workload.files["items"])
    truth = read_csv(workload.files["truth"])
    assert list(items["Reference"]) == list(truth["Reference"])
    joined = items.join(truth[["asset_id", "kind"]])
    true_parcel = parcels.set_index("id").add_prefix("parcel_")
    return joined.join(true_parcel, on="asset_id")


def test_same_seed_same_bytes_and_another_seed_differs(tmp_path: Path) -> None:
    first = generate(tmp_path / "a", assets=300, items=200, seed=3)
    again = generate(tmp_path / "b", assets=300, items=200, seed=3)
    other = generate(tmp_path / "c", assets=300, items=200, seed=4)
    for key, path in first.files.items():
        assert path.read_bytes() == again.files[key].read_bytes(), key
        assert path.read_bytes() != other.files[key].read_bytes(), key


def test_counts_and_file_names(workload: GenerateResult, parcels: pd.DataFrame) -> None:
    assert sorted(p.name for p in workload.out_dir.iterdir()) == [
        "items.csv",
        "items_truth.csv",
        "parcels.zip",
    ]
    assert len(parcels) == ASSETS == workload.assets
    assert len(read_csv(workload.files["items"])) == ITEMS == workload.items
    assert sum(workload.kinds.values()) == ITEMS
    assert workload.localities == parcels["locality"].nunique() >= 2


def test_shapefile_members_crs_fields_and_encoding(workload: GenerateResult) -> None:
    with zipfile.ZipFile(workload.files["parcels"]) as archive:
        names = sorted(archive.namelist())
        assert archive.read("parcels.cpg").decode().strip() == "UTF-8"
        assert "GDA2020" in archive.read("parcels.prj").decode()
    assert names == [f"parcels.{s}" for s in ("cpg", "dbf", "prj", "shp", "shx")]
    info = pyogrio.read_info(workload.files["parcels"])
    assert info["crs"] == "EPSG:7855"
    assert list(info["fields"]) == list(PARCEL_FIELDS)
    assert set(info["ogr_types"]) == {"OFTString"}


def test_parcel_attributes_in_state_style(parcels: pd.DataFrame) -> None:
    for column in ("id", "code", "propnum"):
        assert parcels[column].is_unique, column
    assert parcels["id"].str.fullmatch(r"\d+").all()
    assert parcels["code"].str.fullmatch(r"\d{9}").all()
    assert parcels["propnum"].str.fullmatch(r"\d{6}").all()
    assert parcels["propnum"].str.startswith("0").any()
    assert parcels["postcode"].str.fullmatch(r"3\d{3}").all()
    assert (parcels["type"] == "Property").all()
    assert set(parcels["lu_class"]) == {
        "RESIDENTIAL",
        "COMMERCIAL",
        "INDUSTRIAL",
        "RURAL",
        "COMMUNITY",
    }
    expected = parcels["street"] + " " + parcels["locality"] + " " + parcels["postcode"]
    assert all(n.endswith(e) for n, e in zip(parcels["name"], expected, strict=True))
    units = parcels["name"].str.match(r"UNIT \d+ \d+ ")
    assert units.any()
    assert parcels.loc[units, "house_no"].str.fullmatch(r"\d+/\d+").all()
    assert parcels["house_no"].str.fullmatch(r"\d+-\d+").any()  # number ranges
    assert parcels["street"].str.split(" ").str[-1].isin(list(STREET_TYPES)).all()
    assert parcels["locality"].str.contains(" ").any()  # multi-word localities


def test_same_street_name_with_different_types(parcels: pd.DataFrame) -> None:
    base = parcels["street"].str.rsplit(" ", n=1).str[0]
    types_per_name = parcels.assign(base=base).groupby("base")["street"].nunique()
    assert (types_per_name > 1).any()
    localities_per_street = parcels.groupby("street")["locality"].nunique()
    assert (localities_per_street > 1).any()


def test_parcels_are_in_ballarat(parcels: pd.DataFrame) -> None:
    lon_lat = parcels.to_crs("EPSG:4326").total_bounds
    assert 143.6 < lon_lat[0] < lon_lat[2] < 144.1
    assert -37.8 < lon_lat[1] < lon_lat[3] < -37.3


def test_invalid_and_multipart_parcels(workload: GenerateResult, parcels: pd.DataFrame) -> None:
    geoms = parcels.geometry.to_numpy()
    invalid = ~shapely.is_valid(geoms)
    assert invalid.sum() == workload.invalid_parcels == 3
    reasons = shapely.is_valid_reason(geoms[invalid])
    assert all(reason.startswith("Self-intersection") for reason in reasons)
    multi = shapely.get_type_id(geoms) == shapely.GeometryType.MULTIPOLYGON
    assert multi.sum() == workload.multipart_parcels == round(ASSETS * 0.02)
    assert (shapely.get_num_geometries(geoms[multi]) == 2).all()


def test_parcels_do_not_overlap(parcels: pd.DataFrame) -> None:
    geoms = parcels.geometry.to_numpy()
    valid = geoms[shapely.is_valid(geoms)]
    union = shapely.union_all(valid)
    assert shapely.area(valid).sum() == pytest.approx(union.area, rel=1e-9)
    # Neighbours share their boundaries: most parcels touch another.
    tree = shapely.STRtree(valid)
    pairs = tree.query(valid, predicate="touches")
    assert np.unique(pairs[0]).size > 0.9 * valid.size


def test_every_kind_appears(workload: GenerateResult, rows: pd.DataFrame) -> None:
    assert set(rows["kind"]) == set(KINDS)
    assert all(workload.kinds[kind] >= 1 for kind in KINDS)
    no_parcel = rows["kind"].isin(["bad_address", "bad_latitude", "bad_wkt"])
    assert (rows.loc[no_parcel, "asset_id"] == "").all()
    assert (rows.loc[~no_parcel, "asset_id"] != "").all()
    assert rows.loc[~no_parcel, "parcel_name"].notna().all()


def test_located_rows_fall_inside_their_parcel(rows: pd.DataFrame) -> None:
    coords = rows[rows["kind"] == "coords_only"]
    assert (coords[["Address", "Suburb", "WKT"]] == "").all().all()
    x, y = TO_MGA.transform(coords["Longitude"].astype(float), coords["Latitude"].astype(float))
    points = shapely.points(np.asarray(x), np.asarray(y))
    assert shapely.contains(coords["parcel_geometry"].to_numpy(), points).all()

    wkt = rows[rows["kind"] == "wkt_only"]
    assert wkt["WKT"].str.fullmatch(r"POINT \(143\.\d+ -37\.\d+\)").all()
    lonlat = shapely.get_coordinates(shapely.from_wkt(wkt["WKT"].to_numpy()))
    x, y = TO_MGA.transform(lonlat[:, 0], lonlat[:, 1])
    inside = shapely.contains(wkt["parcel_geometry"].to_numpy(), shapely.points(x, y))
    assert inside.all()


def test_abbreviated_and_expanded_rows(rows: pd.DataFrame) -> None:
    abbreviated = rows[rows["kind"] == "abbreviated"]
    true_type = abbreviated["parcel_street"].str.split(" ").str[-1]
    written = abbreviated["Address"].str.split(" ").str[-1]
    allowed = true_type.map(STREET_TYPES)
    assert all(w in forms for w, forms in zip(written, allowed, strict=True))
    assert (written != true_type).all()

    expanded = rows[rows["kind"] == "expanded"]
    assert expanded["Address"].str.contains(r"\b(?:MOUNT|SAINT)\b").all()
    assert expanded["parcel_street"].str.contains(r"\b(?:MT|ST)\b").all()


def test_typo_rows_are_one_edit_from_the_true_street(rows: pd.DataFrame) -> None:
    typo = rows[rows["kind"] == "typo"]
    true_name = typo["parcel_street"].str.rsplit(" ", n=1).str[0]
    number = typo["parcel_name"].str.extract(r"^((?:UNIT \d+ )?[\d-]+) ")[0]
    written = typo["Address"].str.slice(start=0)
    for address, num, name, street in zip(
        written, number, true_name, typo["parcel_street"], strict=True
    ):
        street_type = street.rsplit(" ", 1)[1]
        assert address.startswith(num + " ") and address.endswith(" " + street_type)
        typed = address[len(num) + 1 : -len(street_type) - 1]
        assert typed != name
        assert Levenshtein.distance(typed, name) <= 2  # a transposition counts two
        assert typed[0] == name[0]


def test_unit_rows_name_the_unit_and_house(rows: pd.DataFrame) -> None:
    unit = rows[rows["kind"] == "unit"]
    unit_no, house = (
        unit["parcel_house_no"].str.split("/").str[0],
        unit["parcel_house_no"].str.split("/").str[1],
    )
    pattern = (
        r"^(?:(?P<a>\d+)/(?P<b>\d+)|UNIT (?P<c>\d+) (?P<d>\d+)"
        r"|U(?P<e>\d+) (?P<f>\d+)|FLAT (?P<g>\d+) (?P<h>\d+)) "
    )
    parts = unit["Address"].str.extract(pattern)
    written_unit = parts[["a", "c", "e", "g"]].bfill(axis=1).iloc[:, 0]
    written_house = parts[["b", "d", "f", "h"]].bfill(axis=1).iloc[:, 0]
    assert (written_unit == unit_no).all()
    assert (written_house == house).all()
    address = unit["Address"]
    forms = np.select(
        [
            address.str.match(r"\d+/"),
            address.str.startswith("UNIT "),
            address.str.match(r"U\d"),
            address.str.startswith("FLAT "),
        ],
        ["slash", "unit", "u", "flat"],
        "other",
    )
    assert set(forms) == {"slash", "unit", "u", "flat"}


def test_rows_without_address(rows: pd.DataFrame) -> None:
    missing = rows[rows["kind"] == "missing_suburb"]
    assert (missing["Suburb"] == "").all() and (missing["Address"] != "").all()

    by_number = rows[rows["kind"] == "propnum_only"]
    assert (by_number[["Address", "Suburb", "Latitude", "WKT"]] == "").all().all()
    written = by_number["Property Number"].str.lstrip("0")
    assert (written == by_number["parcel_propnum"].str.lstrip("0")).all()


def test_exact_swapped_and_messy_rows_keep_the_address(rows: pd.DataFrame) -> None:
    exact = rows[rows["kind"] == "exact"]
    # The address is the parcel's name, or its name without locality and postcode.
    short = [
        name[: -len(f" {loc} {pc}")]
        for name, loc, pc in zip(
            exact["parcel_name"], exact["parcel_locality"], exact["parcel_postcode"], strict=True
        )
    ]
    assert ((exact["Address"] == exact["parcel_name"]) | (exact["Address"] == short)).all()
    assert (exact["Address"] == exact["parcel_name"]).any()
    assert (exact["Suburb"].str.upper() == exact["parcel_locality"]).all()

    messy = rows[rows["kind"] == "case_space"]
    clean = [
        name[: -len(f" {loc} {pc}")]
        for name, loc, pc in zip(
            messy["parcel_name"], messy["parcel_locality"], messy["parcel_postcode"], strict=True
        )
    ]
    normalised = messy["Address"].str.upper().str.split().str.join(" ").str.rstrip(".")
    assert (normalised == clean).all()
    assert (messy["Address"] != clean).all()

    swapped = rows[rows["kind"] == "swapped"]
    words = swapped["Address"] + " " + swapped["Suburb"]
    assert all(
        set(p.split()) <= set(w.upper().split())
        for p, w in zip(swapped["parcel_street"], words, strict=True)
    )


def test_bad_rows(rows: pd.DataFrame) -> None:
    latitude = rows.loc[rows["kind"] == "bad_latitude", "Latitude"].astype(float)
    assert (latitude.abs() > 90).all()
    wkt = rows.loc[rows["kind"] == "bad_wkt", "WKT"]
    assert shapely.from_wkt(wkt.to_numpy(), on_invalid="ignore").tolist() == [None] * len(wkt)
    dates = rows.loc[rows["kind"] == "bad_date", "Inspection Date"]
    assert pd.to_datetime(dates, errors="coerce", format="mixed", dayfirst=True).isna().all()
    occupants = rows.loc[rows["kind"] == "bad_occupants", "Occupants"]
    assert not occupants.str.isdigit().any()
    good = rows[~rows["kind"].isin(["bad_date", "bad_occupants"])]
    assert good["Occupants"].str.isdigit().all()
    parsed = pd.to_datetime(good["Inspection Date"], format="mixed", dayfirst=True)
    assert parsed.notna().all()
    unknown = rows[rows["kind"] == "bad_address"]
    assert (unknown["Address"] != "").all()


def test_other_columns_have_real_data_quirks(rows: pd.DataFrame) -> None:
    assert set(rows["Damage Level"]) <= {"None", "Minor", "Moderate", "Severe", "Destroyed"}
    assert set(rows["Habitable"]) <= {"Yes", "No", "Y", "N", "1", "0"}
    assert {"Zoë Nguyễn", "José Álvarez"} <= set(rows["Inspector"])
    assert rows["Notes"].str.contains("\n").any()
    assert rows["Notes"].str.contains('"').any()
    assert (rows["Notes"] == "[NULL]").any()
    assert rows["Inspection Date"].str.fullmatch(r"\d{2}/\d{2}/\d{4}").any()
    assert rows["Reference"].is_unique and rows["Reference"].str.fullmatch(r"DA-\d{6}").all()


def test_refuses_to_overwrite_and_writes_nothing(tmp_path: Path) -> None:
    first = generate(tmp_path, assets=100, items=20, seed=1)
    before = {path: path.read_bytes() for path in first.files.values()}
    with pytest.raises(ToolkitError, match=r"items\.csv already exists"):
        (tmp_path / "parcels.zip").unlink()
        generate(tmp_path, assets=100, items=20, seed=2)
    assert not (tmp_path / "parcels.zip").exists()  # no half-written set
    assert (tmp_path / "items.csv").read_bytes() == before[first.files["items"]]
    again = generate(tmp_path, assets=100, items=20, seed=2, overwrite=True)
    assert again.files["items"].read_bytes() != before[first.files["items"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "items.csv",
        "items_truth.csv",
        "parcels.zip",
    ]


@pytest.mark.parametrize(
    ("assets", "items", "message"),
    [(0, 10, "assets must be between 1"), (10, -1, "items must be 0 or more")],
)
def test_bad_counts_are_option_errors(
    tmp_path: Path, assets: int, items: int, message: str
) -> None:
    with pytest.raises(OptionError, match=message):
        generate(tmp_path, assets=assets, items=items)


def test_tiny_and_empty_workloads(tmp_path: Path) -> None:
    tiny = generate(tmp_path, assets=1, items=0)
    assert len(pyogrio.read_dataframe(tiny.files["parcels"])) == 1
    assert tiny.files["items"].read_text(encoding="utf-8") == ",".join(ITEM_COLUMNS) + "\n"


def test_cli_generate_prints_json(tmp_path: Path) -> None:
    out = tmp_path / "w"
    result = CliRunner().invoke(
        cli,
        ["--json", "sample", "generate", "--assets", "200", "--items", "50", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["assets"] == 200 and document["items"] == 50
    assert document["files"]["items"] == str(out / "items.csv")
    assert sum(document["kinds"].values()) == 50
    again = CliRunner().invoke(
        cli, ["sample", "generate", "--assets", "200", "--items", "50", "--out", str(out)]
    )
    assert again.exit_code == 1
    assert "already exists" in again.stderr
    assert again.stderr.startswith("Error: ")


# ---------------------------------------------------------------------------------------------
# The committed sample


def test_committed_sample_files_have_the_documented_columns() -> None:
    readme = (SAMPLE / "README.md").read_text(encoding="utf-8")
    expected = {
        "parcels.zip": None,
        "damage_assessments.csv": ITEM_COLUMNS,
        "damage_assessments_truth.csv": TRUTH_COLUMNS,
        "assets.csv": ASSET_COLUMNS,
        "users.csv": USER_COLUMNS,
    }
    for name, columns in expected.items():
        assert (SAMPLE / name).is_file(), name
        assert f"`{name}`" in readme, name
        if columns:
            assert tuple(read_csv(SAMPLE / name).columns) == columns, name
            assert all(f"`{c}`" in readme for c in columns), name
    assert all(f"`{field}`" in readme for field in PARCEL_FIELDS)
    assert all(f"`{kind}`" in readme for kind in KINDS)
    assert sum(p.stat().st_size for p in SAMPLE.iterdir()) < 3_000_000
    parcels = pyogrio.read_dataframe(SAMPLE / "parcels.zip")
    assert len(parcels) == 3000 and parcels.crs.to_epsg() == 7855
    truth = read_csv(SAMPLE / "damage_assessments_truth.csv")
    assert len(truth) == 1000 and set(truth["kind"]) == set(KINDS)


def test_committed_sample_is_what_the_documented_command_makes(tmp_path: Path) -> None:
    readme = (SAMPLE / "README.md").read_text(encoding="utf-8")
    command = re.search(r"^toolkit sample generate .*$", readme, re.MULTILINE)
    assert command, "README does not show the command that made the sample"
    args = command.group(0).split()[1:]
    args[args.index("--out") + 1] = str(tmp_path)
    result = CliRunner().invoke(cli, ["--quiet", *args])
    assert result.exit_code == 0, result.output
    for name in ("damage_assessments.csv", "damage_assessments_truth.csv", "assets.csv"):
        assert (tmp_path / name).read_bytes() == (SAMPLE / name).read_bytes(), name
    made = pyogrio.read_dataframe(tmp_path / "parcels.zip")
    committed = pyogrio.read_dataframe(SAMPLE / "parcels.zip")
    pd.testing.assert_frame_equal(made.drop(columns="geometry"), committed.drop(columns="geometry"))
    assert shapely.equals_exact(made.geometry.to_numpy(), committed.geometry.to_numpy(), 0).all()


def test_users_sample_has_one_bad_email_and_non_ascii_names() -> None:
    users = read_csv(SAMPLE / "users.csv")
    assert 20 <= len(users) <= 40 and users["Username"].is_unique
    valid = users["Email"].str.fullmatch(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")
    assert (~valid).sum() == 1
    assert (users["Position"] == "API User").any()
    assert users["First Name"].map(str.isascii).eq(False).any()


def test_assets_sample_geometries() -> None:
    assets = read_csv(SAMPLE / "assets.csv")
    geoms = shapely.from_wkt(assets["wkt"].to_numpy())
    kinds = set(shapely.get_type_id(geoms).tolist())
    assert kinds == {0, 1, 3}  # points, linestrings, polygons
    assert assets["id"].is_unique and assets["code"].is_unique
    x, y = shapely.get_coordinates(geoms).T
    assert ((x > 143.6) & (x < 144.1) & (y > -37.8) & (y < -37.3)).all()


def test_vocabulary_has_no_repeats() -> None:
    assert len(set(STREET_NAMES)) == len(STREET_NAMES)


def test_a_column_assembles_from_chunked_arrays() -> None:
    # pyarrow chunks an array made from a large numpy string array (the item dates from
    # about 1.7 million rows); the same path at five rows, with the chunks made by hand.
    default = pa.chunked_array([["a0", "a1", "a2"], ["a3", "a4"]])
    spoilt = pa.chunked_array([["X"], ["Y"]])
    column = assemble(5, [(np.array([4, 1]), spoilt)], default)
    assert column.to_pylist() == ["a0", "Y", "a2", "a3", "X"]
    unfilled = assemble(4, [(np.array([2, 0]), spoilt)])
    assert unfilled.to_pylist() == ["Y", None, "X", None]
