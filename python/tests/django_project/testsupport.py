"""One Django set-up per pytest process (Django's settings are global): a fresh
PostgreSQL database as "default", a fresh SQLite file as "lite" and a fresh
MySQL database as "my", each migrated with ``migrate``, and a RabbitMQ queue
name of the session's own."""
import atexit
import os
import secrets
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
_state = {}


def setup(pg_admin_url: str, pg_base_url: str, mysql_url: str) -> dict:
    """Configures Django once; returns {"pg": URL, "lite": URL, "my": URL, "urls": {alias: URL},
    "queue": name, "markers": dir, "env": {...}}. ``mysql_url``: a database on the MySQL
    server (its own, ``mysqlpython_django_…``, is made beside it)."""
    if _state:
        return _state
    import psycopg
    import pymysql

    from onceonly.stores.mysql import connect_args

    name = "h_django_" + secrets.token_hex(5)
    with psycopg.connect(pg_admin_url, autocommit=True, connect_timeout=5) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    my_name = "mysqlpython_django_" + secrets.token_hex(5)
    my_admin = pymysql.connect(**connect_args(mysql_url), autocommit=True, connect_timeout=5)
    with my_admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{my_name}` CHARACTER SET utf8mb4")
    my_admin.close()
    folder = tempfile.mkdtemp(prefix="onceonly-django-")
    env = {
        "ONCEONLY_TEST_DJANGO_DB": f"{pg_base_url}/{name}",
        "ONCEONLY_TEST_DJANGO_SQLITE": f"sqlite:///{folder}/lite.db",
        "ONCEONLY_TEST_DJANGO_MYSQL": mysql_url.rsplit("/", 1)[0] + "/" + my_name,
        "ONCEONLY_TEST_QUEUE": "django-test-" + secrets.token_hex(4),
        "ONCEONLY_TEST_MARKERS": folder,
        "DJANGO_SETTINGS_MODULE": "testproj.settings",
    }
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    # The environment only while the settings and the Celery app (its Django
    # fixup reads DJANGO_SETTINGS_MODULE) are made: other tests' subprocesses
    # must not inherit this project.
    before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        import django

        django.setup()
        import shipping.tasks  # noqa: F401 (the Celery app, with Django's fixup)
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    from django.core.management import call_command

    for alias in ("default", "lite", "my"):
        call_command("migrate", database=alias, verbosity=0)

    def drop():
        from django.db import connections

        connections.close_all()
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin = pymysql.connect(**connect_args(mysql_url), autocommit=True)
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{my_name}`")
        admin.close()

    atexit.register(drop)
    urls = {"default": env["ONCEONLY_TEST_DJANGO_DB"], "lite": env["ONCEONLY_TEST_DJANGO_SQLITE"],
            "my": env["ONCEONLY_TEST_DJANGO_MYSQL"]}
    _state.update(pg=urls["default"], lite=urls["lite"], my=urls["my"], urls=urls,
                  queue=env["ONCEONLY_TEST_QUEUE"], markers=folder, env=env)
    return _state
