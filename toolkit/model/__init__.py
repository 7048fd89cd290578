"""The spec's values: record JSON shapes, register field types, JSON text of fields,
and what one caller may see.

Pure values and conversions, no storage and no I/O. May import ``toolkit.query`` and
``toolkit.errors``.
"""
