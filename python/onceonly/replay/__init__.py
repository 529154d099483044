"""The replay of DESIGN.md section 5 through a real Celery worker:
``python3 -m onceonly.replay --queue celery --broker URL [--db URL] [--runs N] [--json FILE]``."""
