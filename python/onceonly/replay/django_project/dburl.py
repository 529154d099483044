"""The replay's ``--db`` URL as a Django ``DATABASES`` entry. onceonly.django
makes the store's URL back from that entry (stores.url_from); a test checks
the two agree, so the workers' records are where the harness counts."""
from urllib.parse import unquote, urlparse


def database(url: str) -> dict:
    """A Django ``DATABASES`` entry for the replay's ``--db`` URL."""
    if url.startswith("sqlite:///"):
        # As onceonly's own SQLite connections: WAL, and an atomic block takes the write lock when it begins.
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": "/" + url[len("sqlite:///"):].lstrip("/"),
                "OPTIONS": {"init_command": "PRAGMA journal_mode=WAL", "transaction_mode": "IMMEDIATE", "timeout": 30}}
    u = urlparse(url)
    if u.query:
        raise ValueError(f"{u.scheme}:// URL with options ({u.query}): the Django replay takes none; "
                         "put them in the project's DATABASES OPTIONS")
    engine = {"mysql": "mysql", "mariadb": "mysql", "postgres": "postgresql", "postgresql": "postgresql"}.get(u.scheme)
    if engine is None:
        raise ValueError(f"{url!r}: the Django replay runs on sqlite:///, postgresql:// or mysql://")
    entry = {"ENGINE": f"django.db.backends.{engine}", "NAME": unquote(u.path.lstrip("/")),
             "USER": unquote(u.username or ""), "PASSWORD": unquote(u.password or ""),
             "HOST": u.hostname or "", "PORT": str(u.port or "")}
    if engine == "mysql":
        entry["OPTIONS"] = {"charset": "utf8mb4"}  # Django's MySQL backend (mysqlclient), as an application sets it
    return entry
