"""Starts a real tributary-server on free ports for the deployment tests and
stops it: the ports come from the server's own "listening on" log lines."""
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.request

LISTEN = {
    "api": re.compile(r"gRPC API listening on [^\s]*:(\d+)"),
    "health": re.compile(r"gRPC health listening on [^\s]*:(\d+)"),
    "metrics": re.compile(r"metrics listening on http://[^\s]*:(\d+)/metrics"),
}


class TributaryServer:
    def __init__(self, server_bin, client_bin, extra_args=()):
        for path in (server_bin, client_bin):
            if not os.access(path, os.X_OK):
                raise SystemExit(f"{path} not found or not executable: build the project first")
        self.server_bin = server_bin
        self.client_bin = client_bin
        self.log = tempfile.NamedTemporaryFile(prefix="tributary-server-", suffix=".log",
                                               delete=False)
        self.proc = subprocess.Popen(
            [server_bin, "--port", "0", "--health-port", "0", "--metrics-port", "0",
             "--http-port", "-1",
             "--threads", "1", *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.ports = {}
        deadline = time.monotonic() + 60
        while len(self.ports) < len(LISTEN):
            if self.proc.poll() is not None:
                raise SystemExit(f"tributary-server exited {self.proc.returncode}:\n{self.text()}")
            if time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"tributary-server did not listen within 60 s:\n{self.text()}")
            for name, pattern in LISTEN.items():
                m = pattern.search(self.text())
                if m:
                    self.ports[name] = int(m.group(1))
            time.sleep(0.05)

    def text(self):
        with open(self.log.name, encoding="utf-8", errors="replace") as f:
            return f.read()

    def client(self, *args, check=True):
        out = subprocess.run([self.client_bin, "--target", f"127.0.0.1:{self.ports['api']}",
                              "--timeout", "60", *args], capture_output=True, text=True)
        if check and out.returncode != 0:
            raise SystemExit(f"tributary {' '.join(args)} failed: {out.stderr.strip()}")
        return out

    def scrape(self):
        url = f"http://127.0.0.1:{self.ports['metrics']}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read().decode()

    def stop(self):
        """SIGTERM (the server drains), then SIGKILL after 30 s. Returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        os.unlink(self.log.name)
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def exported_names(exposition):
    """Every sample name in a text exposition (histogram and summary series
    appear as their _bucket, _sum and _count names)."""
    names = set()
    for line in exposition.splitlines():
        if line and not line.startswith("#"):
            names.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    return names
