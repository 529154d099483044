"""The replay's Django project (``--framework django``): its workers' store is
the database the harness counts, its models are its migration, and the
timing and policy its guarded tasks run with come from ``settings.ONCEONLY``.
The replay itself runs in CI (.ci/steps/40-python.sh) on real servers."""
import json
import os
import subprocess
import sys

import pytest

from onceonly.django.stores import url_from
from onceonly.replay.django_project.dburl import database
from onceonly.replay.kinds import KINDS, job_of


@pytest.mark.parametrize("url", [
    "postgresql://postgres@127.0.0.1:5432/django_replay",
    "postgresql://user:p%40ss@db.example:6543/replay",
    "mysql://root@127.0.0.1:3306/django_replay",
    "mysql://app:secret@db.example/replay",
    "sqlite:///tmp/replay/replay.db",
])
def test_the_workers_store_is_the_database_the_harness_counts(url):
    entry = database(url)
    vendor = entry["ENGINE"].rsplit(".", 1)[1].replace("sqlite3", "sqlite")
    assert url_from("default", vendor, entry) == url


def test_a_url_with_options_is_refused_not_dropped():
    with pytest.raises(ValueError, match="sslmode=require"):
        database("postgresql://postgres@127.0.0.1/x?sslmode=require")


def _project(tmp_path, code: str) -> subprocess.CompletedProcess:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "broker": "memory://", "db": f"sqlite:///{tmp_path}/replay.db", "run_id": "replay-py-test", "dir": str(tmp_path),
        "queue": "q", "lease": "7s", "timeout": "3s", "visibility_timeout_s": 10.0, "framework": "django",
        "destinations": {"keyed": "http://127.0.0.1:9/", "plain": "http://127.0.0.1:9/"}}))
    env = dict(os.environ, ONCEONLY_REPLAY_CONFIG=str(config),
               DJANGO_SETTINGS_MODULE="onceonly.replay.django_project.settings")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_the_replay_models_are_their_migration(tmp_path):
    done = _project(tmp_path, "import django; django.setup(); from django.core.management import call_command; "
                              "call_command('makemigrations', 'onceonly_replay', check=True, dry_run=True)")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_guarded_tasks_take_their_timing_and_policy_from_django_settings(tmp_path):
    done = _project(tmp_path, "import json; from onceonly.replay import worker_app as w; "
                              "print(json.dumps({k: [g.onceonly_spec.job_type, g.onceonly_spec.lease_ms, "
                              "g.onceonly_spec.timeout_ms, g.onceonly_spec.on_stale.value] for k, (g, _) in w.TASKS.items()}))")
    assert done.returncode == 0, done.stdout + done.stderr
    specs = json.loads(done.stdout.strip().splitlines()[-1])
    assert specs == {kind: [job_of("replay-py-test", kind), 7000, 3000, on_stale]
                     for kind, (_effect, on_stale, _dest) in KINDS.items()}
