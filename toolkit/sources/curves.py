"""Curved geometries (arcs) made straight, by GDAL, as a GeoPackage is read.

A GeoPackage may hold CircularString, CompoundCurve, CurvePolygon, MultiCurve and
MultiSurface shapes, which shapely (GEOS) cannot build. GDAL can approximate each with
straight segments (what ``ogr2ogr -nlt CONVERT_TO_LINEAR`` does): its C API returns
linear geometries while ``OGRSetNonLinearGeometriesEnabledFlag(FALSE)`` is in force.
pyogrio does not expose that switch, so it is set through ctypes on the GDAL library
pyogrio itself loaded (the same library, so the same switch), for the one read, under
a lock. pyogrio's Arrow reader does not honour it; the row-by-row reader does, which
is why only files with curves take that (slower) path.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyogrio

# ISO WKB type codes (less 1000s for Z, M, ZM) of the curve types GEOS cannot read.
CURVE_TYPES = (8, 9, 10, 11, 12)
_switch = threading.Lock()


def is_curve_error(error: BaseException) -> bool:
    """Whether ``error`` is shapely refusing a curve ("Nonlinear geometry types...")."""
    return isinstance(error, NotImplementedError) and "onlinear geometr" in str(error)


def count_curves(wkb: pa.ChunkedArray | pa.Array) -> int:
    """How many of the WKB values are curves: their type code read from the 5-byte
    header of every value at once (the byte order, then the type)."""
    values = wkb.combine_chunks() if isinstance(wkb, pa.ChunkedArray) else wkb
    values = values.cast(pa.large_binary()).drop_null()
    if len(values) == 0:
        return 0
    heads = pc.binary_slice(values, 0, 5)
    heads = heads.filter(pc.equal(pc.binary_length(heads), 5))
    # Every head is 5 bytes: the data buffer between the first and last offset is them.
    _, offsets, data = heads.buffers()
    ends = np.frombuffer(offsets, dtype=np.int64)[heads.offset : heads.offset + len(heads) + 1]
    raw = np.frombuffer(data, dtype=np.uint8)[ends[0] : ends[-1]].reshape(-1, 5)
    little = raw[:, 0] == 1
    code = np.where(
        little,
        raw[:, 1].astype(np.uint32) | raw[:, 2].astype(np.uint32) << 8,
        raw[:, 4].astype(np.uint32) | raw[:, 3].astype(np.uint32) << 8,
    )
    return int(np.isin(code % 1000, CURVE_TYPES).sum())


@functools.cache
def _gdal() -> Any:
    """The GDAL library pyogrio loaded (None if it cannot be found)."""
    for path in _loaded_gdal_paths():
        try:
            library = ctypes.CDLL(path)
            library.OGRSetNonLinearGeometriesEnabledFlag  # noqa: B018 - has the switch
        except (OSError, AttributeError):
            continue
        return library
    return None


def _loaded_gdal_paths() -> list[str]:
    """Where the GDAL library is: the one mapped into this process (Linux), the one
    bundled in pyogrio's wheel, or the system's."""
    found: list[str] = []
    maps = Path("/proc/self/maps")
    if maps.exists():
        for line in maps.read_text(errors="replace").splitlines():
            name = line.rsplit(" ", 1)[-1]
            if "libgdal" in Path(name).name and name not in found:
                found.append(name)
    package = Path(pyogrio.__file__).parent
    for pattern in ("pyogrio.libs/*gdal*", "pyogrio/.dylibs/*gdal*"):
        found += [str(p) for p in sorted(package.parent.glob(pattern))]
    system = ctypes.util.find_library("gdal")
    if system:
        found.append(system)
    return found


def can_linearise() -> bool:
    return _gdal() is not None


@contextmanager
def linear_geometries() -> Iterator[None]:
    """While inside, GDAL hands over curves as straight segments (see the module)."""
    library = _gdal()
    assert library is not None, "check can_linearise() first"
    with _switch:
        before = library.OGRGetNonLinearGeometriesEnabledFlag()
        library.OGRSetNonLinearGeometriesEnabledFlag(0)
        try:
            yield
        finally:
            library.OGRSetNonLinearGeometriesEnabledFlag(before)
