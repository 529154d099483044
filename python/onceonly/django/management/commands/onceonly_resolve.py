"""manage.py onceonly_resolve ...: the CLI's ``resolve`` on the Django database.

A resolve is a person's fenced move with its audit event; it is the Rust
CLI's (one implementation of that rule), run here with ``ONCEONLY_DB`` set to
the Django database, so nobody copies the URL by hand."""
import os
import shutil
import subprocess

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Resolve a held operation (completed, queued, failed or cancelled) with the onceonly CLI on Django's database"

    def add_arguments(self, parser):
        parser.add_argument("--database", default=None, help="the Django database alias of the records")
        parser.add_argument("--job", required=True)
        parser.add_argument("--key", required=True)
        parser.add_argument("--as", dest="resolution", required=True, choices=["completed", "queued", "failed", "cancelled"])
        parser.add_argument("--reason", required=True)
        parser.add_argument("--token", default=None, help="the token you looked at (manage.py onceonly_held)")
        parser.add_argument("--ref", default=None, help="with --as completed: the effect's reference")

    def handle(self, *args, **options):
        from onceonly.django import conf
        from onceonly.django.stores import url_of

        settings = conf.options()
        if settings["SCHEMA"] != "onceonly":
            raise CommandError(f"ONCEONLY['SCHEMA'] is {settings['SCHEMA']!r}; the CLI reads the schema onceonly only")
        binary = os.environ.get("ONCEONLY_BIN") or shutil.which("onceonly")
        if not binary:
            raise CommandError("the onceonly CLI is not on PATH (nor ONCEONLY_BIN): install it with "
                               "`cargo install --path crates/onceonly-cli`; see docs/django.md")
        # The URL through the environment, not the command line: ps would show a password.
        env = dict(os.environ, ONCEONLY_DB=url_of(options["database"] or settings["DATABASE"]))
        cmd = [binary, "resolve",
               "--job", options["job"], "--key", options["key"], "--as", options["resolution"], "--reason", options["reason"]]
        if options["token"]:
            cmd += ["--token", options["token"]]
        if options["ref"]:
            cmd += ["--ref", options["ref"]]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        self.stdout.write(done.stdout.rstrip())
        if done.returncode != 0:
            raise CommandError(done.stderr.strip() or f"onceonly resolve exited {done.returncode}")
