"""manage.py onceonly_held [--job T] [--json]: what waits for a person (as ``onceonly held``)."""
from onceonly.django import reads

from ._base import StoreCommand


class Command(StoreCommand):
    help = "List held operations (waiting for a person), oldest first; resolve with manage.py onceonly_resolve"
    read = staticmethod(reads.held)
    noun = "held, waiting for a person (manage.py onceonly_resolve)"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--job", default=None, help="only this job type")

    def handle(self, *args, **options):
        store = self.store(options)
        records = self.read(store, options["job"])
        now = store.now()
        lines = [reads.waiting(r, now) for r in records]
        if options["json"]:
            return self.write_json(lines)
        for line in lines:
            self.stdout.write(f"{line['job']}  {line['key']}  token {line['token']}  owner {line['owner'] or '-'}  "
                              f"attempts {line['attempts']}  age {line['age']}  {line['error'] or ''}".rstrip())
        self.stdout.write(f"{len(lines)} {self.noun}")
