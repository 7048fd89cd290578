"""Damage assessments from the field, linked to property assets.

Assets are linked by an ``assetId`` column when the rows carry one (rows resolved
offline before a push), else by the property number, else by the row's point
(latitude/longitude or WKT) inside a parcel, else by the address and suburb
sounding like a parcel's address, with a fuzzy fallback.
"""

from toolkit.importing.rules import AssetLink, FieldRule, ImportRule

RULE = ImportRule(
    name="damage-assessments",
    import_type="item",
    description="Damage assessment register items, linked to property parcels",
    register="damage-assessment",
    register_name="Damage assessments",
    fields=(
        FieldRule("reference", "Reference", required=True, description="unique reference"),
        FieldRule("address", "Address"),
        FieldRule("suburb", "Suburb"),
        FieldRule("propertyNumber", "Property Number"),
        FieldRule(
            "damageLevel",
            "Damage Level",
            type="lookup",
            choices=("None", "Minor", "Moderate", "Severe", "Destroyed"),
            role="severity",
        ),
        FieldRule("inspectionDate", "Inspection Date", type="date", role="inspected"),
        FieldRule("habitable", "Habitable", type="boolean", role="habitable"),
        FieldRule("occupants", "Occupants", type="integer", role="occupants"),
        FieldRule("inspector", "Inspector"),
        FieldRule("notes", "Notes"),
    ),
    asset_link=AssetLink(
        # Rows resolved offline before a push carry their asset's id; it wins when present.
        id_column="assetId",
        lookup_column="Property Number",
        codefield="propnum",
        friendly_columns=("Address", "Suburb"),
        use_geometry=True,
        options={
            "mode": "soundex",
            "maxRank": 3,
            "fallbackMode": "fuzzy",
            "assetClass": "Property",
        },
    ),
    matching_id="reference",
    overwrite_rule="updateAndInsert",
)
