"""The SQLite file and its -wal and -shm are created 0600 whatever the umask:
checked in a child process whose umask is 022, as a shell usually leaves it."""
import json
import subprocess
import sys

CHILD = r"""
import json, os, stat, sys
import onceonly
from onceonly.stores.sqlite import SqliteStore
path = sys.argv[1]
plain = path + ".plain"
open(plain, "w").close()
store = SqliteStore("sqlite:///" + path)
store.migrate()
store.enqueue("private", "k1", onceonly.Payload.parse('{"card": "4111 1111 1111 1111"}'))
modes = {s: stat.S_IMODE(os.stat(path + s).st_mode) for s in ("", "-wal", "-shm", ".plain")}
print(json.dumps(modes))
"""


def test_the_database_its_wal_and_shm_are_0600_under_umask_022(tmp_path):
    db = tmp_path / "private.db"
    out = subprocess.run([sys.executable, "-c", CHILD, str(db)], umask=0o022, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    modes = json.loads(out.stdout)
    assert modes[".plain"] == 0o644, "the child's umask is not 022"
    assert {s: oct(m) for s, m in modes.items() if s != ".plain"} == {"": "0o600", "-wal": "0o600", "-shm": "0o600"}
