"""A user's asset rule: areas from a spatial layer, named by default when it has no names."""

from toolkit.importing.rules import FieldRule, ImportRule

RULE = ImportRule(
    name="test-areas",
    import_type="asset",
    description="areas of any shape, for the spatial tests",
    asset_type="Area",
    fields=(
        FieldRule("name", "Name", default="Unnamed area"),
        FieldRule("code", "Code"),
    ),
    matching_id="code",
    overwrite_rule="insertOnly",
)
