"""Property parcels from a zipped Shapefile in the style of state property data.

Columns: ``id`` (kept as the asset id), ``code`` (the parcel's PFI), ``name``
(the full address), ``propnum`` and the address parts, which become extraInfo
codes so assets can be matched on them (``codeField propnum``).
"""

from toolkit.importing.rules import FieldRule, ImportRule

RULE = ImportRule(
    name="property-assets",
    import_type="asset",
    description="Property parcels (polygons) with their address, PFI and property number",
    asset_type="Property",
    fields=(
        FieldRule("id", "id", type="integer", description="asset id, kept as given"),
        FieldRule("code", "code", required=True, aliases=("PFI",), description="parcel id (PFI)"),
        FieldRule(
            "name",
            "name",
            required=True,
            aliases=("EZI_ADD", "address"),
            description="full address",
        ),
        FieldRule("type", "type", description="asset class; Property when empty"),
        FieldRule(
            "propnum",
            "propnum",
            aliases=("PROPNUM", "property number"),
            description="council property number",
        ),
        FieldRule("house_no", "house_no"),
        FieldRule("street", "street"),
        FieldRule("locality", "locality"),
        FieldRule(
            "postcode", "postcode", pattern=r"\d{4}", pattern_reason="is not a 4-digit postcode"
        ),
        FieldRule("lu_class", "lu_class", description="land-use class"),
    ),
    matching_id="code",
    overwrite_rule="updateAndInsert",
)
