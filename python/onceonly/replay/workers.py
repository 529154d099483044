"""Real Celery worker processes for the replay: started, watched, restarted
after a SIGKILL, stopped at the end."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import List


class Workers:
    """``count`` solo-pool Celery workers, each its own OS process: the process
    that runs the task is the one holding the broker connection, so killing it
    leaves the broker to redeliver."""

    def __init__(self, config_path: str, run_dir: str, queue: str, count: int):
        self.config_path, self.run_dir, self.queue, self.count = config_path, run_dir, queue, count
        self.procs: List[subprocess.Popen] = []
        self.started = 0
        self.sigkilled = 0  # worker processes found dead of SIGKILL (then restarted)

    def _spawn(self) -> subprocess.Popen:
        self.started += 1
        env = dict(os.environ, ONCEONLY_REPLAY_CONFIG=self.config_path)
        log = open(os.path.join(self.run_dir, f"worker-{self.started}.log"), "ab")
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "onceonly.replay.worker_app", "worker", "-P", "solo",
             "--without-gossip", "--without-mingle", "--without-heartbeat", "-Q", self.queue,
             "-n", f"w{self.started}-{os.path.basename(self.run_dir)}@%h", "--loglevel", "WARNING"],
            env=env, stdout=log, stderr=subprocess.STDOUT)

    def _ready(self, proc: subprocess.Popen) -> bool:
        return os.path.exists(os.path.join(self.run_dir, f"ready-{proc.pid}"))

    def ensure(self, timeout: float = 60) -> int:
        """Restarts any worker that died (a SIGKILL scenario); waits until all consume. How many were restarted."""
        alive = [p for p in self.procs if p.poll() is None]
        self.sigkilled += sum(1 for p in self.procs if p.returncode == -signal.SIGKILL)
        restarted = self.count - len(alive)
        self.procs = alive + [self._spawn() for _ in range(restarted)]
        deadline = time.monotonic() + timeout
        while not all(self._ready(p) for p in self.procs):
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"a Celery worker exited with {dead[0].returncode} while starting; "
                                   f"see {self.run_dir}/worker-*.log")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Celery workers not ready after {timeout}s; see {self.run_dir}/worker-*.log")
            time.sleep(0.05)
        return restarted

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
