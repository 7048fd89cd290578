"""Heavy libraries imported when first used, not when the module naming them is imported.

pandas, numpy, pyarrow and shapely take about a second to import cold; a command that
never touches a table or a geometry (``toolkit ping``, ``toolkit users list``) should not
pay it (issue 17). A module that uses them in a few functions writes::

    if TYPE_CHECKING:
        import pandas as pd
    else:
        pd = lazy("pandas")

and mypy sees the real module while the running code imports it on the first ``pd.X``.
"""

from __future__ import annotations

import importlib
import types
from typing import Any


class LazyModule(types.ModuleType):
    """Stands for the module ``name``; the first attribute asked for imports it."""

    def __getattr__(self, attribute: str) -> Any:
        # Only called for what is not in this object yet: the first access, then never
        # again for the module's own attributes, which are copied here.
        module = importlib.import_module(self.__name__)
        self.__dict__.update(module.__dict__)
        return getattr(module, attribute)


def lazy(name: str) -> Any:
    """A stand-in for the module ``name`` (dotted names too) that imports it on first use."""
    return LazyModule(name)
