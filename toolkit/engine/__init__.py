"""Running the heavy stages on Dask: `--engine dask` for `import` and `lookup`.

Owns the cluster (a ``distributed.LocalCluster`` started and closed by the command, or a
running scheduler by address), the partitioning of rows with their global row numbers,
the reference by which workers load the asset index once per process, and the progress
of partitions done. The stages themselves are the local engine's, unchanged
(``toolkit.importing.partitions.partition_stages``, ``toolkit.matching.lookup.run_lookup``):
they are pure functions of a partition, so the parts give exactly what the whole gives.
Planning and writing stay one transaction in the calling process.

May import ``toolkit.importing``, ``toolkit.matching``, ``toolkit.model`` and the shared
top-level modules, and is the only package that imports ``dask`` or ``distributed``;
never ``toolkit.store``'s SQL, ``toolkit.site``, ``toolkit.remote``, ``toolkit.server``
or ``toolkit.cli`` (the CLI imports it, lazily, only for ``--engine dask``).
"""

from toolkit.engine.cluster import DaskEngine, dask_engine
from toolkit.engine.index_ref import IndexRef, loaded_index

__all__ = ["DaskEngine", "IndexRef", "dask_engine", "loaded_index"]
