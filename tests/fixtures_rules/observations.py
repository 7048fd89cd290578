"""A user's item rule without asset links: observations."""

from toolkit.importing.rules import FieldRule, ImportRule

RULE = ImportRule(
    name="test-observations",
    import_type="item",
    description="observations for the import tests",
    register="observation",
    register_name="Observations",
    fields=(
        FieldRule("reference", "Reference", required=True),
        FieldRule("level", "Level", type="lookup", choices=("Low", "High")),
        FieldRule("count", "Count", type="integer"),
        FieldRule("notes", "Notes"),
        FieldRule("status", "Status", type="integer", default=1),
    ),
    matching_id="reference",
)
