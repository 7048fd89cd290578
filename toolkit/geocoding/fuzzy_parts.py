"""Keeping the probabilistic matcher's side of a gazetteer (its parsed addresses) as bytes.

Parsing a million addresses for the matcher takes about a minute, so a gazetteer keeps
the result. It is written generically, field by field of the matcher's own dataclasses,
as Arrow IPC, and read back only when the matcher's code is the code that wrote it
(:func:`matcher_fingerprint`): a changed parser or blocking key must not meet keys made by
the old one, so anything else is rebuilt from the addresses.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

log = logging.getLogger(__name__)

PREFIX = "fuzzy/"
MANIFEST = PREFIX + "manifest.json"


def matcher_fingerprint() -> str:
    """A hash of the source of the modules whose output a gazetteer keeps (the address
    model, the asset index and the probabilistic matcher)."""
    from toolkit.matching import address, index, probabilistic

    digest = hashlib.sha256()
    for module in (address, index, probabilistic):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:16]


def save_fuzzy_side(side: Any) -> dict[str, bytes]:
    """Every array of ``side`` (an ``AssetSide``) as a part, plus a manifest."""
    arrays: dict[str, np.ndarray] = {}
    _flatten("", side, arrays)
    parts = {PREFIX + name: _to_ipc(values) for name, values in arrays.items()}
    manifest = {"fingerprint": matcher_fingerprint(), "arrays": sorted(arrays)}
    parts[MANIFEST] = json.dumps(manifest).encode("utf-8")
    return parts


def load_fuzzy_side(parts: Mapping[str, bytes]) -> Any | None:
    """The ``AssetSide`` kept in ``parts``, or None when there is none or the matcher's
    code has changed since (the caller then builds it again)."""
    from toolkit.matching.probabilistic import AssetSide

    if MANIFEST not in parts:
        return None
    manifest = json.loads(parts[MANIFEST])
    if manifest.get("fingerprint") != matcher_fingerprint():
        log.warning("the gazetteer's matcher data is from another toolkit version; rebuilding")
        return None
    arrays = {
        name: _from_ipc(parts[PREFIX + name])
        for name in manifest["arrays"]
        if PREFIX + name in parts
    }
    try:
        return _rebuild(AssetSide, "", arrays)
    except (KeyError, TypeError, ValueError) as exc:
        log.warning("the gazetteer's matcher data is unreadable (%s); rebuilding", exc)
        return None


def _flatten(prefix: str, value: Any, out: dict[str, np.ndarray]) -> None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _flatten(f"{prefix}{f.name}.", getattr(value, f.name), out)
    elif isinstance(value, np.ndarray):
        out[prefix.rstrip(".")] = value
    elif isinstance(value, dict):
        keys = list(value)
        if keys and all(isinstance(v, np.ndarray) for v in value.values()):
            for key in keys:
                out[f"{prefix}{key}"] = value[key]
        else:  # a dict of numbers: keys and values as two arrays
            out[f"{prefix}keys"] = np.asarray(keys, dtype=object)
            out[f"{prefix}values"] = np.asarray(list(value.values()), dtype=float)
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            _flatten(f"{prefix}{i}.", item, out)
    else:
        raise TypeError(f"cannot keep a {type(value).__name__} at {prefix!r}")


def _rebuild(cls: Any, prefix: str, arrays: dict[str, np.ndarray]) -> Any:
    """An instance of dataclass ``cls`` from the arrays ``_flatten`` wrote under ``prefix``."""
    values: dict[str, Any] = {}
    hints = {f.name: f for f in dataclasses.fields(cls)}
    for name, f in hints.items():
        key = f"{prefix}{name}"
        nested = _dataclass_type(cls, f)
        if nested is not None:
            values[name] = _rebuild(nested, key + ".", arrays)
        elif key in arrays:
            values[name] = arrays[key]
        else:
            values[name] = _collection(key + ".", arrays)
    return cls(**values)


def _dataclass_type(cls: Any, f: dataclasses.Field[Any]) -> Any | None:
    import typing

    hint = typing.get_type_hints(cls).get(f.name)
    return hint if dataclasses.is_dataclass(hint) else None


def _collection(prefix: str, arrays: dict[str, np.ndarray]) -> Any:
    """A dict (of arrays, or of numbers) or a tuple of them, from the arrays under ``prefix``."""
    names = [name[len(prefix) :] for name in arrays if name.startswith(prefix)]
    if not names:
        raise KeyError(prefix.rstrip("."))
    heads = {name.split(".", 1)[0] for name in names}
    if any("." in name for name in names):  # a tuple of dicts of numbers
        return tuple(_collection(f"{prefix}{i}.", arrays) for i in sorted(heads, key=int))
    if heads == {"keys", "values"}:
        return dict(
            zip(arrays[prefix + "keys"].tolist(), arrays[prefix + "values"].tolist(), strict=True)
        )
    return {(int(head) if head.isdigit() else head): arrays[prefix + head] for head in heads}


def _to_ipc(values: np.ndarray) -> bytes:
    """One array as a zstd-compressed Arrow IPC stream; integers that fit are stored as
    int32 (row numbers mostly do), the original type kept in the schema's metadata."""
    if values.dtype == object:
        array = pa.array(values, type=pa.large_string())
    elif values.dtype == np.int64 and (
        not len(values) or (values.min() >= -(2**31) and values.max() < 2**31)
    ):
        array = pa.array(values.astype(np.int32))
    else:
        array = pa.array(values)
    table = pa.table({"values": array}).replace_schema_metadata({"dtype": str(values.dtype)})
    sink = io.BytesIO()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _from_ipc(data: bytes) -> np.ndarray:
    table = pa.ipc.open_stream(io.BytesIO(data)).read_all()
    column = table.column("values")
    if pa.types.is_large_string(column.type) or pa.types.is_string(column.type):
        return np.asarray(column.to_numpy(zero_copy_only=False), dtype=object)
    dtype = (table.schema.metadata or {}).get(b"dtype", b"").decode() or None
    values: np.ndarray = column.to_numpy()
    return values if dtype is None else values.astype(dtype, copy=False)
