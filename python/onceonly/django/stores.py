"""The records' store on a Django database: its URL made from the alias's
settings, so the store's own connections (claims of non-local effects,
heartbeats, reads) reach the same database Django's ORM writes to."""
from __future__ import annotations

import os
from functools import lru_cache
from typing import Any, Optional
from urllib.parse import quote, urlencode

from django.db import connections

from .. import connect
from ..errors import InvalidInput
from ..stores import Store
from . import conf


def url_of(alias: str) -> str:
    """A URL onceonly opens for Django database ``alias`` (the test database, under Django's test runner)."""
    conn = connections[alias]
    return url_from(alias, conn.vendor, conn.settings_dict)


def url_from(alias: str, vendor: str, s: dict) -> str:
    """The URL for one ``DATABASES`` entry of Django ``vendor``."""
    if vendor == "sqlite":
        name = str(s["NAME"])
        if name == ":memory:" or "mode=memory" in name:
            raise InvalidInput(
                f"Django database {alias!r} is in memory: onceonly needs a SQLite file every worker opens "
                f"(under Django's test runner, name one in DATABASES[{alias!r}]['TEST']['NAME'])")
        return "sqlite:///" + os.path.abspath(name).lstrip("/")
    if vendor == "postgresql":
        user = quote(s.get("USER") or "", safe="")
        password = s.get("PASSWORD") or ""
        auth = (user + (":" + quote(password, safe="") if password else "") + "@") if user else ""
        host = s.get("HOST") or ""
        host = f"[{host}]" if ":" in host else quote(host, safe="")
        port = f":{s['PORT']}" if s.get("PORT") else ""
        options = {k: v for k, v in (s.get("OPTIONS") or {}).items() if isinstance(v, (str, int))}
        query = ("?" + urlencode(options)) if options else ""
        return f"postgresql://{auth}{host}{port}/{quote(str(s['NAME']), safe='')}{query}"
    if vendor == "mysql":
        # onceonly's own connections (PyMySQL or mysqlclient) to the entry's
        # server and database; its OPTIONS (init_command, isolation_level,
        # read_default_file) are Django's connection's, not read here.
        user = quote(s.get("USER") or "", safe="")
        password = s.get("PASSWORD") or ""
        auth = (user + (":" + quote(password, safe="") if password else "") + "@") if user else ""
        host = s.get("HOST") or "localhost"
        socket = ""
        if host.startswith("/"):  # Django's way to name a Unix socket
            host, socket = "localhost", "?" + urlencode({"socket": s["HOST"]})
        host = f"[{host}]" if ":" in host else quote(host, safe="")
        port = f":{s['PORT']}" if s.get("PORT") else ""
        return f"mysql://{auth}{host}{port}/{quote(str(s['NAME']), safe='')}{socket}"
    raise InvalidInput(f"Django database {alias!r} is {vendor}: onceonly runs on sqlite, postgresql or mysql")


@lru_cache(maxsize=None)
def _store(url: str, schema: str) -> Store:
    return connect(url, schema=schema)


def store(using: Optional[str] = None) -> Store:
    """The store on Django database ``using`` (default: ``ONCEONLY['DATABASE']``)."""
    opts = conf.options()
    return _store(url_of(using or opts["DATABASE"]), opts["SCHEMA"])


class LazyStore:
    """A store resolved at first use, not at import: a task module is imported
    before Django's test runner renames the test database."""

    def __init__(self, using: Optional[str] = None):
        self.using = using

    def __getattr__(self, name: str) -> Any:
        return getattr(store(self.using), name)
