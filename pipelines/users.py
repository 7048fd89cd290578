"""Users and their positions, from CSV."""

from toolkit.importing.rules import FieldRule, ImportRule

RULE = ImportRule(
    name="users",
    import_type="user",
    description="Users with their contact details and positions",
    fields=(
        FieldRule(
            "username",
            "Username",
            required=True,
            pattern=r"[\w.@+-]{2,64}",
            pattern_reason="is not a username (2-64 letters, digits or . @ + - _)",
        ),
        FieldRule("firstName", "First Name"),
        FieldRule("lastName", "Last Name"),
        FieldRule(
            "email",
            "Email",
            pattern=r"[^@\s]+@[^@\s]+\.[^@\s]+",
            pattern_reason="is not an email address",
        ),
        FieldRule("phone", "Phone"),
        FieldRule(
            "positions",
            "Position",
            type="list",
            aliases=("Positions",),
            description="one or more positions, separated by ; or ,",
        ),
        FieldRule("organisation", "Organisation"),
    ),
    matching_id="username",
    overwrite_rule="updateAndInsert",
)
