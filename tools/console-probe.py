#!/usr/bin/env python3
"""Probes a running `onceonly console` the way issue #26 did, for two
binaries in the same run (a baseline and a candidate), and prints each
figure side by side:

- 200 wrong-token logins from one address: how long, how many tokens the
  console compared (401) and how many it refused to compare (429);
- 1,100 sockets holding half a request line: how many the console still
  holds open 15 s later (the candidate's header timeout is 10 s);
- a 50 MB payload: the size of its /op page, and of its download.

    python3 tools/console-probe.py BASELINE_BIN CANDIDATE_BIN
"""

import http.client
import json
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

TOKEN = "probe-console-token"
PAYLOAD_BYTES = 50 * 1024 * 1024


def start(binary, db):
    env = dict(os.environ, ONCEONLY_CONSOLE_TOKEN=TOKEN)
    proc = subprocess.Popen(
        [binary, "--db", db, "console", "--listen", "127.0.0.1:0"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stderr.readline()
    addr = re.search(r"http://([^/]+)/", line).group(1)
    host, port = addr.rsplit(":", 1)
    return proc, host, int(port)


def post_login(host, port, token, cookie=None):
    conn = http.client.HTTPConnection(host, port, timeout=30)
    body = urllib.parse.urlencode({"name": "probe", "token": token, "next": "/"})
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    conn.request("POST", "/login", body, headers)
    res = conn.getresponse()
    res.read()
    conn.close()
    return res.status, res.getheader("Set-Cookie")


def wrong_logins(host, port):
    statuses = []
    t0 = time.monotonic()
    for _ in range(200):
        statuses.append(post_login(host, port, "wrong-" + TOKEN)[0])
    elapsed = time.monotonic() - t0
    return elapsed, statuses.count(401), statuses.count(429)


def half_sent(host, port, n=1100, wait=15.0):
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, port))
        s.sendall(b"GET /login HT")
        socks.append(s)
    time.sleep(wait)
    # poll, not select: the descriptors go past select's 1,024.
    poller = select.poll()
    for s in socks:
        poller.register(s, select.POLLIN)
    # A socket the console closed (or answered) is readable.
    ready = {fd for fd, _ in poller.poll(0)}
    open_ = sum(1 for s in socks if s.fileno() not in ready)
    for s in socks:
        s.close()
    return open_


def big_page(host, port, cookie):
    conn = http.client.HTTPConnection(host, port, timeout=120)
    q = urllib.parse.urlencode({"job": "probe", "key": "big"})
    t0 = time.monotonic()
    conn.request("GET", "/op?" + q, headers={"Cookie": cookie})
    res = conn.getresponse()
    page = res.read()
    page_s = time.monotonic() - t0
    conn.request("GET", "/op/payload?" + q, headers={"Cookie": cookie})
    res = conn.getresponse()
    download = res.read() if res.status == 200 else b""
    conn.close()
    return len(page), page_s, len(download)


def probe(binary, enqueue_bin):
    tmp = tempfile.mkdtemp(prefix="console-probe")
    db = f"sqlite://{tmp}/probe.db"
    jsonl = os.path.join(tmp, "big.jsonl")
    with open(jsonl, "w") as f:
        json.dump({"key": "big", "payload": {"blob": "a" * PAYLOAD_BYTES}}, f)
        f.write("\n")
    subprocess.run(
        [enqueue_bin, "--db", db, "enqueue", "--job", "probe", "--jsonl", jsonl],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    proc, host, port = start(binary, db)
    try:
        out = {}
        out["wrong_logins"] = wrong_logins(host, port)
        out["held_open"] = half_sent(host, port)
        # A fresh console for the page: the wrong logins above may still
        # keep this address waiting.
    finally:
        proc.kill()
        proc.wait()
    proc, host, port = start(binary, db)
    try:
        status, cookie = post_login(host, port, TOKEN)
        assert status == 303, status
        out["big_page"] = big_page(host, port, cookie.split(";")[0])
    finally:
        proc.kill()
        proc.wait()
    return out


def main():
    baseline, candidate = sys.argv[1], sys.argv[2]
    rows = {}
    for name, binary in (("baseline", baseline), ("candidate", candidate)):
        rows[name] = probe(binary, baseline)
    print(f"{'':44} {'baseline':>14} {'candidate':>14}")
    for label, pick in (
        ("200 wrong logins: seconds", lambda r: f"{r['wrong_logins'][0]:.1f}"),
        ("200 wrong logins: tokens compared (401)", lambda r: r["wrong_logins"][1]),
        ("200 wrong logins: refused uncompared (429)", lambda r: r["wrong_logins"][2]),
        ("1,100 half-sent sockets: held after 15 s", lambda r: r["held_open"]),
        ("50 MB payload: /op page bytes", lambda r: r["big_page"][0]),
        ("50 MB payload: /op page seconds", lambda r: f"{r['big_page'][1]:.2f}"),
        ("50 MB payload: download bytes", lambda r: r["big_page"][2]),
    ):
        print(f"{label:44} {pick(rows['baseline']):>14} {pick(rows['candidate']):>14}")


if __name__ == "__main__":
    main()
