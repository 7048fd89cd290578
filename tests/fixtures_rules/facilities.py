"""A user's asset rule: facilities from CSV with WKT."""

from toolkit.importing.rules import FieldRule, ImportRule

RULE = ImportRule(
    name="test-facilities",
    import_type="asset",
    description="facilities for the import tests",
    asset_type="Facility",
    fields=(
        FieldRule("code", "Code", required=True),
        FieldRule("name", "Name", required=True),
        FieldRule("type", "Type"),
        FieldRule("capacity", "Capacity", type="integer"),
        FieldRule("manager", "Manager"),
    ),
    matching_id="code",
    overwrite_rule="updateAndInsert",
)
