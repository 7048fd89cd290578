"""The import job: the request, the pipeline's stages, linking, the overwrite plan, rules,
results and scheduling (spec 2.7, 4.4).

Owns everything between "a file and a rule" and "rows written and a job object". May
import ``toolkit.sources``, ``toolkit.matching``, ``toolkit.store``, ``toolkit.model``,
``toolkit.query`` and the shared top-level modules; never ``toolkit.site`` (except the
index cache, which the scheduled task asks for lazily), ``toolkit.remote``,
``toolkit.server`` or ``toolkit.cli``.
"""
