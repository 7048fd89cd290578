"""Sample data: the synthetic council generator, its vocabulary, and the demo site.

The generator (``generate``, ``parcels``, ``items``, ``extras``, ``columns``, ``vocab``)
imports nothing above ``toolkit.errors`` and ``toolkit.progress``; the demo (``demo``) builds
a site from ``sample_data/`` and so may import ``toolkit.site`` and ``toolkit.importing``.
"""
