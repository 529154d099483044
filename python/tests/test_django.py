"""onceonly.django in a real Django project (tests/django_project) on a real
PostgreSQL database ("default"), a SQLite file ("lite") and a real MariaDB
database ("my", Django's MySQL backend on mysqlclient): the migration is
the stores' own, the local effect's ORM writes and record commit or roll back
together in Django's atomic block, settings come from Django settings."""
import json
import os
import secrets
import subprocess
import sys

import pytest

import onceonly
from onceonly import Done, LocalEffectFailed, State
from conftest import MYSQL_URL, PG_ADMIN, PG_URL, MySqlUser, need_mysql, need_postgres

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.join(HERE, "django_project")


@pytest.fixture(scope="module")
def dj():
    try:
        from testsupport import setup  # noqa: F401 (on sys.path below)
    except ImportError:
        sys.path.insert(0, PROJECT)
        from testsupport import setup
    need_postgres()
    need_mysql()
    return setup(PG_ADMIN, PG_URL.rsplit("/", 1)[0], MYSQL_URL)


@pytest.fixture(params=["default", "lite", "my"])
def alias(request, dj):
    return request.param


def key():
    return "o-" + secrets.token_hex(4)


def shipped(alias, order_id):
    from shipping.models import Shipment

    return Shipment.objects.using(alias).filter(order_id=order_id).count()


def record(alias, job, order_id):
    from onceonly.django import store

    snap = store(alias).get(job, order_id)
    return snap.record if snap else None


def ship_guard(alias, job="ship_inproc", fail=False):
    from onceonly.django import guard
    from shipping.models import Shipment

    @guard(job=job, key="order_id", using=alias)
    def ship(ctx, order_id):
        Shipment.objects.using(ctx.conn.alias).create(order_id=order_id)
        if fail:
            raise ValueError("no such address")
        return {"shipped": order_id, "token": ctx.token}

    return ship


def test_the_orm_write_and_the_record_commit_together(alias):
    k = key()
    outcome = ship_guard(alias)(order_id=k)
    assert outcome == Done({"shipped": k, "token": 1}, None, repeat=False)
    assert shipped(alias, k) == 1
    r = record(alias, "ship_inproc", k)
    assert (r.state, r.token, r.result) == (State.COMPLETED, 1, json.dumps({"shipped": k, "token": 1}, separators=(",", ":"), sort_keys=True))


def test_an_exception_in_the_effect_rolls_back_the_row_and_the_claim(alias):
    k = key()
    with pytest.raises(LocalEffectFailed, match="rolled back: ValueError: no such address"):
        ship_guard(alias, fail=True)(order_id=k)
    assert shipped(alias, k) == 0 and record(alias, "ship_inproc", k) is None
    # The operation is free to be done: the next delivery does it once.
    assert ship_guard(alias)(order_id=k).repeat is False and shipped(alias, k) == 1


def test_a_second_delivery_finds_the_completed_record_and_writes_nothing(alias):
    k = key()
    ship = ship_guard(alias)
    first, again = ship(order_id=k), ship(order_id=k)
    assert (first.repeat, again.repeat, again.result) == (False, True, first.result)
    assert shipped(alias, k) == 1
    assert record(alias, "ship_inproc", k).attempts == 1


def test_inside_the_callers_atomic_block_the_callers_rollback_undoes_both(alias):
    """The guard's block is a savepoint in the caller's transaction, also when
    the caller's block has run no statement yet (psycopg's own transaction()
    would have committed there by itself)."""
    from django.db import transaction

    class Abandon(Exception):
        pass

    k = key()
    with pytest.raises(Abandon):
        with transaction.atomic(using=alias):
            assert ship_guard(alias)(order_id=k).repeat is False
            raise Abandon()
    assert shipped(alias, k) == 0 and record(alias, "ship_inproc", k) is None
    with transaction.atomic(using=alias):
        ship_guard(alias)(order_id=k)
    assert shipped(alias, k) == 1 and record(alias, "ship_inproc", k).state is State.COMPLETED


def test_the_cli_reads_what_the_django_guard_wrote(alias, dj, cli):
    k = key()
    ship_guard(alias)(order_id=k)
    url = dj["urls"][alias]
    out = subprocess.run([cli, "--db", url, "inspect", "--job", "ship_inproc", "--json"],
                         capture_output=True, text=True, check=True).stdout
    rows = {r["key"]: r for r in map(json.loads, out.splitlines())}
    assert (rows[k]["state"], rows[k]["token"], json.loads(rows[k]["result"])) == ("completed", 1, {"shipped": k, "token": 1})


def test_settings_override_the_decorator_and_unknown_keys_are_refused(dj):
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    from onceonly.django import guard

    tuned = guard(job="ship_tuned", key="order_id")(lambda ctx, order_id: None)
    assert (tuned.onceonly_guard.spec.lease_ms, tuned.onceonly_guard.spec.timeout_ms) == (45_000, 15_000)
    with override_settings(ONCEONLY={"JOB": {}}):
        with pytest.raises(ImproperlyConfigured, match=r"unknown keys \['JOB'\]"):
            guard(job="x", key="order_id")
    with override_settings(ONCEONLY={"JOBS": {"x": {"leese": "1s"}}}):
        with pytest.raises(ImproperlyConfigured, match=r"\['JOBS'\]\['x'\] has unknown keys \['leese'\]"):
            guard(job="x", key="order_id")
    with override_settings(ONCEONLY={"DATABASE": "nope"}):
        with pytest.raises(ImproperlyConfigured, match="'nope', which is not in settings.DATABASES"):
            guard(job="x", key="order_id")


def test_the_store_defaults_to_djangos_database(dj):
    from onceonly.django import store

    from onceonly.stores.sqlite import path_of

    assert store().url == dj["pg"]
    assert os.path.realpath(store("lite").path) == os.path.realpath(path_of(dj["lite"]))
    assert store("my").url == dj["my"] and store("my").dialect == "mysql"


def manage(url, *args):
    env = dict(os.environ, ONCEONLY_TEST_DJANGO_DB=url, DJANGO_SETTINGS_MODULE="testproj.settings")
    env.pop("ONCEONLY_TEST_DJANGO_SQLITE", None)
    return subprocess.run([sys.executable, "manage.py", *args], cwd=PROJECT, env=env, capture_output=True, text=True)


def migrations_applied(url):
    if url.startswith("mysql"):
        user = MySqlUser(url)
        rows = list(user.execute("SELECT version, name, applied_at FROM onceonly_migrations ORDER BY version"))
        user.close()
        return rows
    store = onceonly.connect(url)
    conn = store._conn()
    table = "onceonly_migrations" if store.dialect == "sqlite" else "onceonly.migrations"
    rows = conn.execute(f"SELECT version, name, applied_at FROM {table} ORDER BY version").fetchall()
    store.close()
    return rows


def test_manage_py_migrate_makes_the_schema_the_cli_and_python_store_use(db_url, cli):
    from onceonly import sqlfiles

    done = manage(db_url, "migrate")
    assert done.returncode == 0 and "Applying onceonly.0001_tables... OK" in done.stdout, done.stdout + done.stderr
    applied = migrations_applied(db_url)
    dialect = "sqlite" if db_url.startswith("sqlite") else "mysql" if db_url.startswith("mysql") else "postgres"
    assert [(v, n) for v, n, _ in applied] == [(v, n) for v, n, _ in sqlfiles.migrations(dialect)]
    # The CLI finds every migration applied: it records nothing again.
    subprocess.run([cli, "--db", db_url, "migrate"], check=True, capture_output=True)
    assert migrations_applied(db_url) == applied
    subprocess.run([cli, "--db", db_url, "enqueue", "--job", "ship", "--key", "k-1", "--payload", '{"n": 1}'],
                   check=True, capture_output=True)
    store = onceonly.connect(db_url)
    r = store.get("ship", "k-1").record
    assert (r.state, r.payload) == (State.QUEUED, '{"n":1}')
    store.close()
    # Not a model a project can migrate away: going back is refused.
    back = manage(db_url, "migrate", "onceonly", "zero")
    assert back.returncode != 0 and "is not reversible" in back.stderr, back.stderr[-1500:]


def run_command(name, *args, **options):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command(name, *args, stdout=out, **options)
    return out.getvalue()


def cli_lines(cli, url, *args):
    out = subprocess.run([cli, "--db", url, *args, "--json"], capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


TIMELY = ("age_ms", "age", "over_lease_ms", "now")  # read at each command's own moment


def test_manage_py_held_stuck_history_and_resolve_agree_with_the_cli(alias, dj, cli, monkeypatch):
    import time

    from onceonly import Payload
    from onceonly.django import store

    s, url = store(alias), dj["urls"][alias]
    job, held_key, stuck_key = "cmd_" + secrets.token_hex(3), key(), key()
    c = s.claim(job, held_key, "dead-worker:1:0", Payload.of({"n": 1}), 1)
    time.sleep(0.05)
    s.take_over(job, held_key, c.token, State.HELD, "w:2", 1000, "the effect may or may not have happened")
    s.audit(job, held_key, "take_over", "w:2", c.token + 1, State.CLAIMED, State.HELD, "stale token 1")
    s.claim(job, stuck_key, "dead-worker:1:0", Payload.of({"n": 2}), 1)
    time.sleep(0.05)

    def ours(lines):
        return [{k: v for k, v in line.items() if k not in TIMELY} for line in lines]

    for command, cli_command, expected in (("onceonly_held", "held", held_key), ("onceonly_stuck", "stuck", stuck_key)):
        mine = [json.loads(line) for line in run_command(command, "--json", job=job, database=alias).splitlines()]
        assert [line["key"] for line in mine] == [expected]
        assert ours(mine) == ours(cli_lines(cli, url, cli_command, "--job", job))
    said = run_command("onceonly_held", job=job, database=alias)
    assert f"{job}  {held_key}  token 2" in said and "1 held, waiting for a person" in said

    history = [json.loads(line) for line in run_command("onceonly_history", job, held_key, "--json", database=alias).splitlines()]
    assert history == cli_lines(cli, url, "history", "--job", job, "--key", held_key)
    assert [h["kind"] for h in history] == ["record", "event"]

    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match=f"no operation {job}:nope"):
        run_command("onceonly_history", job, "nope", database=alias)

    monkeypatch.setenv("ONCEONLY_BIN", cli)
    said = run_command("onceonly_resolve", job=job, key=held_key, resolution="queued", reason="checked: not sent",
                       token="2", database=alias)
    assert s.get(job, held_key).record.state is State.QUEUED, said
    events = [json.loads(line)["event"] for line in run_command("onceonly_history", job, held_key, "--json", database=alias).splitlines()[1:]]
    assert events == ["take_over", "resolved"]
    with pytest.raises(CommandError, match="token"):
        run_command("onceonly_resolve", job=job, key=held_key, resolution="failed", reason="again", token="2", database=alias)


def test_the_effect_kind_is_not_a_setting(dj):
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    from onceonly.django import guard

    with override_settings(ONCEONLY={"JOBS": {"x": {"effect": "keyed"}}}):
        with pytest.raises(ImproperlyConfigured, match=r"unknown keys \['effect'\]"):
            guard(job="x", key="order_id")


def test_on_commit_hooks_of_the_effect_run_once_after_the_record_commits(alias):
    """A follow-up registered with transaction.on_commit inside the guarded
    function runs after the record is committed, once: not on a repeat, not
    when the effect fails."""
    from django.db import transaction

    from onceonly.django import guard

    ran = []

    def make(fail=False):
        @guard(job="ship_hooks", key="order_id", using=alias)
        def ship(ctx, order_id):
            transaction.on_commit(lambda: ran.append((order_id, record(alias, "ship_hooks", order_id).state)), using=alias)
            if fail:
                raise ValueError("refused")

        return ship

    k, failing = key(), key()
    make()(order_id=k)
    make()(order_id=k)
    with pytest.raises(LocalEffectFailed):
        make(fail=True)(order_id=failing)
    assert ran == [(k, State.COMPLETED)]


def test_the_store_url_keeps_every_part_of_a_django_database_entry(dj):
    from psycopg.conninfo import conninfo_to_dict

    from onceonly.django.stores import url_from

    entry = {"NAME": "shop db", "USER": "app@eu", "PASSWORD": "p@ss:w/rd?#", "HOST": "::1", "PORT": "6432",
             "OPTIONS": {"sslmode": "require", "application_name": "shop"}}
    assert conninfo_to_dict(url_from("default", "postgresql", entry)) == {
        "dbname": "shop db", "user": "app@eu", "password": "p@ss:w/rd?#", "host": "::1", "port": "6432",
        "sslmode": "require", "application_name": "shop"}
    assert conninfo_to_dict(url_from("default", "postgresql", {"NAME": "shop", "HOST": "/var/run/postgresql"})) == {
        "dbname": "shop", "host": "/var/run/postgresql"}
    with pytest.raises(onceonly.InvalidInput, match=r"in memory.*\['TEST'\]\['NAME'\]"):
        url_from("default", "sqlite", {"NAME": "file:memorydb_default?mode=memory&cache=shared"})
    with pytest.raises(onceonly.InvalidInput, match="'legacy' is oracle: onceonly runs on sqlite, postgresql or mysql"):
        url_from("legacy", "oracle", {"NAME": "x"})
    from onceonly.stores.mysql import connect_args

    assert connect_args(url_from("my", "mysql", entry)) == {
        "host": "::1", "port": 6432, "user": "app@eu", "password": "p@ss:w/rd?#", "database": "shop db"}
    assert connect_args(url_from("my", "mysql", {"NAME": "shop", "HOST": "/run/mysqld/mysqld.sock"})) == {
        "host": "localhost", "port": 3306, "user": "", "password": "", "database": "shop",
        "unix_socket": "/run/mysqld/mysqld.sock"}


def test_guarded_task_takes_its_timing_from_settings_and_its_store_from_django(dj):
    from celery import Celery

    from onceonly.django.celery import guarded_task
    from shipping.models import Shipment

    app = Celery("settings_test")

    @guarded_task(app, job="ship_tuned", key="order_id", lease="10s", timeout="5s")
    def ship_tuned(ctx, order_id):
        Shipment.objects.create(order_id=order_id)
        return {"shipped": order_id}

    assert (ship_tuned.onceonly_spec.lease_ms, ship_tuned.onceonly_spec.timeout_ms) == (45_000, 15_000)
    assert ship_tuned.soft_time_limit == 15
    k = key()
    assert ship_tuned.apply(args=[k]).get() == {"shipped": k}
    assert ship_tuned.apply(args=[k]).get() == {"shipped": k}
    assert shipped("default", k) == 1 and record("default", "ship_tuned", k).state is State.COMPLETED


def test_a_local_task_called_inside_the_callers_atomic_block_leaves_it_usable(dj):
    """The task does not close Django's connection under an open atomic block
    (an eager call, ``task.apply()``): the caller's transaction goes on, and
    its rollback undoes the task's row and record."""
    from celery import Celery
    from django.db import transaction

    from onceonly.django.celery import guarded_task
    from shipping.models import Shipment

    @guarded_task(Celery("eager_test"), job="ship_eager", key="order_id")
    def ship_eager(ctx, order_id):
        Shipment.objects.create(order_id=order_id)
        return {"shipped": order_id}

    class Abandon(Exception):
        pass

    k = key()
    with pytest.raises(Abandon):
        with transaction.atomic():
            assert ship_eager.apply(args=[k]).get() == {"shipped": k}
            assert Shipment.objects.filter(order_id=k).count() == 1  # the caller's block goes on
            raise Abandon()
    assert shipped("default", k) == 0 and record("default", "ship_eager", k) is None


def test_manage_py_migrate_after_the_cli_applies_nothing_again(db_url, cli):
    subprocess.run([cli, "--db", db_url, "migrate"], check=True, capture_output=True)
    applied = migrations_applied(db_url)
    done = manage(db_url, "migrate")
    assert done.returncode == 0 and "Applying onceonly.0001_tables... OK" in done.stdout, done.stdout + done.stderr
    assert migrations_applied(db_url) == applied
