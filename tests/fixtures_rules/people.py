"""A user's user rule."""

from toolkit.importing.rules import FieldRule, ImportRule

RULE = ImportRule(
    name="test-users",
    import_type="user",
    description="users for the import tests",
    fields=(
        FieldRule("username", "Username", required=True),
        FieldRule("firstName", "First Name"),
        FieldRule("email", "Email"),
        FieldRule("positions", "Positions", type="list"),
        FieldRule("team", "Team"),
    ),
    matching_id="username",
)
