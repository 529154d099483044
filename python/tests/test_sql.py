"""The statements come from the Rust stores' files, never retyped."""
import re

import pytest

from onceonly import sqlfiles
from onceonly.stores import sqlite as sqlite_store
from onceonly.stores.postgres import in_schema, migrate_lock_key
from conftest import REPO


@pytest.mark.parametrize("store", ["sqlite", "postgres", "mysql"])
def test_the_package_ships_the_rust_stores_files_byte_for_byte(store):
    crate = REPO / "crates" / f"onceonly-{store}"
    for kind in ("queries", "migrations"):
        for src in (crate / kind).glob("*.sql"):
            if kind == "queries":
                assert sqlfiles.query(store, src.stem) == src.read_text("utf-8"), src
    wanted = [(int(p.stem.split("_", 1)[0]), p.stem.split("_", 1)[1]) for p in sorted((crate / "migrations").glob("*.sql"))]
    assert [(v, n) for v, n, _ in sqlfiles.migrations(store)] == wanted


def test_the_migration_names_are_the_rust_stores():
    rust = (REPO / "crates/onceonly-sqlite/src/lib.rs").read_text()
    names = re.findall(r'version: (\d+),\s*name: "(\w+)"', rust)
    assert [(int(v), n) for v, n in names] == [(v, n) for v, n, _ in sqlfiles.migrations("sqlite")]


def test_old_sqlite_gets_one_clock_expression_replaced_and_nothing_else():
    for path in (REPO / "crates/onceonly-sqlite/queries").glob("*.sql"):
        original = path.read_text("utf-8")
        text = sqlite_store.statement(path.stem)
        if sqlite_store.NEEDS_CLOCK_FUNCTION:
            assert "unixepoch" not in text
            assert text == original.replace(sqlite_store.CLOCK_EXPR, "onceonly_clock_ms()")
        else:
            assert text == original


def test_schema_replacement_and_lock_key_match_the_rust_store():
    assert in_schema("SELECT * FROM onceonly.ops; CREATE SCHEMA IF NOT EXISTS onceonly;", "billing") == \
        'SELECT * FROM "billing".ops; CREATE SCHEMA IF NOT EXISTS "billing";'
    assert in_schema("onceonly_x xonceonly $onceonly", "b") == "onceonly_x xonceonly $onceonly"
    assert migrate_lock_key("onceonly") != migrate_lock_key("billing")
    assert -(2**63) <= migrate_lock_key("onceonly") < 2**63
