"""What the onceonly_* commands share: the store on the Django database chosen."""
import json

from django.core.management.base import BaseCommand


class StoreCommand(BaseCommand):
    def add_arguments(self, parser):
        parser.add_argument("--database", default=None,
                            help="the Django database alias of the records (default: ONCEONLY['DATABASE'])")
        parser.add_argument("--json", action="store_true", help="one JSON object per line, as the CLI's --json")

    def store(self, options):
        from onceonly.django import store

        return store(options["database"])

    def write_json(self, lines):
        for line in lines:
            self.stdout.write(json.dumps(line, separators=(",", ":")))
