"""Assets of any class from a CSV with WKT or latitude/longitude columns.

Every column the rule does not name is kept as an extraInfo code under its
heading, so ``asset_no`` becomes a code the matching engine can search.
"""

from toolkit.importing.rules import FieldRule, ImportRule

RULE = ImportRule(
    name="assets-csv",
    import_type="asset",
    description="Assets of any class from CSV (geometry from WKT or latitude/longitude)",
    asset_type="Asset",
    fields=(
        FieldRule("id", "id", type="integer", description="asset id, kept as given"),
        FieldRule("code", "code", required=True, description="asset code"),
        FieldRule("name", "name", required=True),
        FieldRule("type", "type", description="asset class; Asset when empty"),
        FieldRule("friendly", "friendly", description="display name"),
    ),
    matching_id="code",
    overwrite_rule="updateAndInsert",
    keep_other_columns=True,
)
