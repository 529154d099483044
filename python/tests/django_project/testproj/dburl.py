"""A Django DATABASES entry from a test database URL (sqlite:///ABS, postgresql://... or mysql://...)."""
from urllib.parse import unquote, urlparse


def database(url: str) -> dict:
    if url.startswith("sqlite:///"):
        # WAL, as onceonly's own connections set it: readers never wait on a
        # worker's open transaction. IMMEDIATE: an atomic block takes the
        # write lock when it begins, waiting on the timeout.
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": "/" + url[len("sqlite:///"):],
                "OPTIONS": {"init_command": "PRAGMA journal_mode=WAL", "transaction_mode": "IMMEDIATE", "timeout": 30}}
    u = urlparse(url)
    if u.scheme in ("mysql", "mariadb"):
        # Django's MySQL backend (mysqlclient), as an application configures it.
        return {"ENGINE": "django.db.backends.mysql", "NAME": unquote(u.path.lstrip("/")),
                "USER": unquote(u.username or ""), "PASSWORD": unquote(u.password or ""),
                "HOST": u.hostname or "", "PORT": str(u.port or ""), "OPTIONS": {"charset": "utf8mb4"}}
    if u.scheme not in ("postgres", "postgresql"):
        raise ValueError(f"{url!r}: the test project runs on sqlite:///, postgresql:// or mysql://")
    return {"ENGINE": "django.db.backends.postgresql", "NAME": unquote(u.path.lstrip("/")),
            "USER": unquote(u.username or ""), "PASSWORD": unquote(u.password or ""),
            "HOST": u.hostname or "", "PORT": str(u.port or "")}
