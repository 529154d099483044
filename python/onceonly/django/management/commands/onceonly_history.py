"""manage.py onceonly_history JOB KEY [--json]: an operation's record and audit trail (as ``onceonly history``)."""
from django.core.management.base import CommandError

from onceonly.django import reads

from ._base import StoreCommand


class Command(StoreCommand):
    help = "Show an operation's record and audit trail, oldest event first"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("job", help="job type")
        parser.add_argument("key", help="operation key")

    def handle(self, *args, **options):
        job, key = options["job"], options["key"]
        lines = reads.history(self.store(options), job, key)
        if lines is None:
            raise CommandError(f"no operation {job}:{key}: no record, so no history (purged, or never enqueued or claimed)")
        if options["json"]:
            return self.write_json(lines)
        r, events = lines[0], lines[1:]
        self.stdout.write(f"{job}:{key} is {r['state']} (token {r['token']}, attempts {r['attempts']}, "
                          f"owner {r['owner'] or '-'}, updated {r['updated_at']})" + (f": {r['error']}" if r["error"] else ""))
        for e in events:
            self.stdout.write(f"{e['at']}  {e['event']}  {e['actor']}  token {e['token']}  "
                              f"{e['from_state'] or '-'} -> {e['to_state'] or '-'}  {e['detail'] or ''}".rstrip())
        self.stdout.write(f"{len(events)} events")
