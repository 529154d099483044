"""The stores' SQL, loaded from the package's copy of the Rust stores' files
(written by tools/sync-sql, checked in CI): never retyped here."""
from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from typing import List, Tuple

_MIGRATION_NAME = re.compile(r"^(\d+)_(\w+)\.sql$")


@lru_cache(maxsize=None)
def query(store: str, name: str) -> str:
    """The text of ``<store>/queries/<name>.sql``."""
    return resources.files(__package__).joinpath("sql", store, "queries", f"{name}.sql").read_text("utf-8")


@lru_cache(maxsize=None)
def migrations(store: str) -> Tuple[Tuple[int, str, str], ...]:
    """``(version, name, sql)`` of ``<store>/migrations/NNNN_name.sql`` in order,
    numbered and named from the file name as the Rust stores list them."""
    folder = resources.files(__package__).joinpath("sql", store, "migrations")
    found: List[Tuple[int, str, str]] = []
    for entry in folder.iterdir():
        m = _MIGRATION_NAME.match(entry.name)
        if m:
            found.append((int(m.group(1)), m.group(2), entry.read_text("utf-8")))
    return tuple(sorted(found))
