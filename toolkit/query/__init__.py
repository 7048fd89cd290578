"""Query parsing: the GET parameters of collections, the ``cql`` subset, bounded JSON.

Owns turning text a caller sent (URL parameters, command-line options, request bodies)
into checked values. May import only ``toolkit.errors``: it is the bottom layer.
"""
