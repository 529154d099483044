"""The replay's Django project: settings made from the run's config file
(env ONCEONLY_REPLAY_CONFIG), a Celery app configured from those settings,
and one app holding the local effect's rows as Django models (created by
``manage.py migrate``, as onceonly's own tables are).

``python -m onceonly.replay --queue celery --framework django`` runs its
workers; the guarded tasks are onceonly.django.celery's, their timing and
policy in ``settings.ONCEONLY['JOBS']``."""
