"""What the replay's worker tasks are, per effect kind: shared by the plain
Celery app (worker_app) and the Django project's settings (django_project),
which must name the same jobs."""
from __future__ import annotations

KINDS = {  # kind -> (effect, on_stale, destination)
    "local": ("local", "hold", None),
    "keyed": ("keyed", "hold", "keyed"),
    "lookup": ("lookup", "hold", "plain"),
    "opaque/hold": ("opaque", "hold", "plain"),
    "opaque/at-least-once": ("opaque", "at-least-once", "plain"),
    "opaque/at-most-once": ("opaque", "at-most-once", "plain"),
}


def slug(kind: str) -> str:
    return kind.replace("/", "-")


def job_of(run_id: str, kind: str, naive: bool = False) -> str:
    return f"{run_id}.{'naive.' if naive else ''}{slug(kind)}"


def transport_options(visibility_timeout_s: float) -> dict:
    """Redis: a message a killed worker held comes back after the visibility
    timeout, swept for every second (kombu sweeps every 100s by default)."""
    return {"visibility_timeout": visibility_timeout_s, "unacked_restore_interval": 1, "unacked_restore_throttle": 1}
