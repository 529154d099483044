"""onceonly's Django settings, one dict in settings.py:

    ONCEONLY = {
        "DATABASE": "default",        # the Django database alias the records live in
        "SCHEMA": "onceonly",         # PostgreSQL only: the records' schema (the CLI's default)
        "JOBS": {                     # per job type; these win over the decorator's arguments
            "ship_order": {"lease": "60s", "timeout": "20s"},
        },
    }

Every key is optional. An unknown key is refused by name (a typo would
otherwise silently leave a default in force).
"""
from __future__ import annotations

from typing import Any, Dict

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

TOP_KEYS = {"DATABASE", "SCHEMA", "JOBS"}
# Timing and policy only: the effect kind is what the code does, not a deployment's choice.
JOB_KEYS = {"on_stale", "lease", "timeout", "heartbeat", "max_retries"}


def options() -> Dict[str, Any]:
    """``settings.ONCEONLY`` checked, with the defaults filled in."""
    given = getattr(settings, "ONCEONLY", None) or {}
    if not isinstance(given, dict):
        raise ImproperlyConfigured(f"settings.ONCEONLY must be a dict, not {type(given).__name__}")
    unknown = sorted(set(given) - TOP_KEYS)
    if unknown:
        raise ImproperlyConfigured(f"settings.ONCEONLY has unknown keys {unknown}; known: {sorted(TOP_KEYS)}")
    jobs = given.get("JOBS") or {}
    for job, job_options in jobs.items():
        if not isinstance(job_options, dict):
            raise ImproperlyConfigured(f"settings.ONCEONLY['JOBS'][{job!r}] must be a dict")
        bad = sorted(set(job_options) - JOB_KEYS)
        if bad:
            raise ImproperlyConfigured(
                f"settings.ONCEONLY['JOBS'][{job!r}] has unknown keys {bad}; known: {sorted(JOB_KEYS)}")
    alias = given.get("DATABASE", "default")
    if alias not in settings.DATABASES:
        raise ImproperlyConfigured(f"settings.ONCEONLY['DATABASE'] is {alias!r}, which is not in settings.DATABASES")
    return {"DATABASE": alias, "SCHEMA": given.get("SCHEMA", "onceonly"), "JOBS": jobs}


def job_options(job: str, **given: Any) -> Dict[str, Any]:
    """The decorator's arguments for ``job`` with ``ONCEONLY['JOBS'][job]`` laid over them."""
    return {**given, **options()["JOBS"].get(job, {})}
