#!/usr/bin/env python3
"""End to end: a real Prometheus (Debian's /usr/bin/prometheus) scrapes a
running tributary-server every second with deploy/prometheus's rules loaded;
after a few requests, the recording rule of the per-layer update-to-stream
ratio must answer over the HTTP API with one finite, positive value for every
(layer, sublayer), equal to rate(_sum)/rate(_count) computed by hand.

  prometheus_e2e.py --repo DIR --server BIN --client BIN [--prometheus BIN]

Every process it starts is stopped on the way out, whatever happens.
"""
import argparse
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

from tributary_server import TributaryServer

RECORD = "instance:tributary_residual_update_to_stream_ratio:mean5m"
JOB_RECORD = "job:tributary_residual_update_to_stream_ratio:mean5m"
COUNT = "tributary_residual_update_to_stream_ratio_count"
WAIT_S = 60


def label_key(labels):
    """A series' (layer, sublayer), from a query result's labels."""
    return (labels["layer"], labels["sublayer"])


def server_counts(exposition):
    """{(layer, sublayer): count} of COUNT in the server's own /metrics text."""
    counts = {}
    for line in exposition.splitlines():
        if not line.startswith(COUNT + "{"):
            continue
        labels_text, value = line[len(COUNT) + 1:].rsplit("} ", 1)
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels_text))
        counts[label_key(labels)] = float(value.split()[0])
    return counts


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(port, promql, at=None):
    params = {"query": promql}
    if at is not None:
        params["time"] = at
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"query {promql!r}: {body}")
    return body["data"]["result"]


class Prometheus:
    def __init__(self, binary, rules_dir, target_port, workdir):
        self.workdir = workdir
        config = os.path.join(workdir, "prometheus.yml")
        with open(config, "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - {rules_dir}/recording-rules.yaml
  - {rules_dir}/alert-rules.yaml
scrape_configs:
  - job_name: tributary
    static_configs:
      - targets: ["127.0.0.1:{target_port}"]
""")
        self.log = open(os.path.join(workdir, "prometheus.log"), "w+")
        # The port is picked free and then bound by Prometheus: another
        # process may take it in between, so try a few.
        for _ in range(3):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [binary, f"--config.file={config}",
                 f"--storage.tsdb.path={os.path.join(workdir, 'data')}",
                 f"--web.listen-address=127.0.0.1:{self.port}",
                 "--web.enable-lifecycle"],
                stdout=self.log, stderr=subprocess.STDOUT)
            if self.wait_ready():
                return
            self.stop()
        raise SystemExit("prometheus did not become ready:\n" + self.text())

    def wait_ready(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.2)
        return False

    def text(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--server", required=True)
    ap.add_argument("--client", required=True)
    ap.add_argument("--prometheus", default="/usr/bin/prometheus")
    args = ap.parse_args()
    if not os.access(args.prometheus, os.X_OK):
        print(f"prometheus_e2e: {args.prometheus} not found: run ./scripts/install-deps.sh "
              "(Debian package prometheus)", file=sys.stderr)
        return 1

    # Absolute: Prometheus resolves rule_files against the config's folder,
    # and a pattern that matches nothing is silently no rule at all.
    rules_dir = os.path.abspath(os.path.join(args.repo, "deploy", "prometheus"))
    workdir = tempfile.mkdtemp(prefix="tributary-prometheus-")
    server = prometheus = None
    started = time.monotonic()
    try:
        server = TributaryServer(args.server, args.client)
        prometheus = Prometheus(args.prometheus, rules_dir, server.ports["metrics"], workdir)
        print(f"tributary-server metrics on :{server.ports['metrics']}, "
              f"prometheus on :{prometheus.port} ({time.monotonic() - started:.1f} s)")

        with urllib.request.urlopen(
                f"http://127.0.0.1:{prometheus.port}/api/v1/rules", timeout=10) as r:
            groups = json.load(r)["data"]["groups"]
        loaded = {rule.get("name") for g in groups for rule in g["rules"]}
        if RECORD not in loaded:
            raise SystemExit(f"prometheus did not load {RECORD} from {rules_dir} "
                             f"(loaded: {sorted(loaded)})")
        print(f"prometheus loaded {len(loaded)} rules in {len(groups)} groups")

        # Wait for a first scrape, so that the counters have a sample before
        # the requests: rate() then sees the increase the requests cause.
        deadline = time.monotonic() + WAIT_S
        while not query(prometheus.port, 'up{job="tributary"} == 1'):
            if time.monotonic() > deadline:
                raise SystemExit("prometheus never scraped the server:\n" + prometheus.text())
            time.sleep(0.5)

        for prompt in ("ROMEO:", "JULIET:", "First Citizen:"):
            server.client("generate", prompt, "--max-new-tokens", "16", "--temperature", "0")
        print(f"sent 3 requests ({time.monotonic() - started:.1f} s)")

        # The requests are over: the server's counts are final. One series
        # per (layer, sublayer) that the server exports.
        final_counts = server_counts(server.scrape())
        expected_series = len(final_counts)

        # Wait until Prometheus holds a scrape of those final counts. A rule
        # evaluated before that (while a scrape was still being ingested:
        # slow under the sanitizers) used counts from the middle of the
        # requests, which a query at the same time may no longer see.
        deadline = time.monotonic() + WAIT_S
        while True:
            stored = {label_key(r["metric"]): float(r["value"][1])
                      for r in query(prometheus.port, COUNT)}
            if stored == final_counts:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"prometheus never stored the final {COUNT}: "
                                 f"{stored} against the server's {final_counts}")
            time.sleep(0.5)
        settled = time.time()

        # Then a rule evaluated after that: its samples are of the final
        # counts (any scrape still being ingested holds the same counts).
        deadline = time.monotonic() + WAIT_S
        result = []
        while True:
            evaluated = query(prometheus.port, f"timestamp({RECORD})")
            result = [r for r in query(prometheus.port, RECORD)
                      if math.isfinite(float(r["value"][1])) and float(r["value"][1]) > 0]
            if (result and len(result) >= expected_series and
                    len(evaluated) >= expected_series and
                    min(float(r["value"][1]) for r in evaluated) > settled):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"no finite {RECORD} within {WAIT_S} s; last answer: "
                                 f"{query(prometheus.port, RECORD)}\n{prometheus.text()}")
            time.sleep(0.5)
        print(f"{RECORD}: {len(result)} series ({time.monotonic() - started:.1f} s)")

        failures = []
        layers = sorted({(int(r['metric']['layer']), r['metric']['sublayer']) for r in result})
        for r in sorted(result, key=lambda r: (int(r["metric"]["layer"]), r["metric"]["sublayer"])):
            m = r["metric"]
            for label in ("layer", "sublayer", "kind", "job", "instance"):
                if label not in m:
                    failures.append(f"{m} has no {label} label")
            print(f"  layer {m['layer']:>2} {m['sublayer']:<5} {m['kind']:<16} "
                  f"{float(r['value'][1]):.4g}")
        if len(layers) != expected_series:
            failures.append(f"{len(layers)} (layer, sublayer) pairs, expected {expected_series}")

        # The rule against the same ratio computed by hand, at the time the
        # rule was evaluated (a query a little later may see one more scrape;
        # the counters no longer move, so it holds the same counts), where
        # rate(_sum)/rate(_count) of the same samples is exact (the
        # extrapolation factors cancel).
        at = min(float(r["value"][1]) for r in evaluated)
        by_hand = {}
        ratio = COUNT[:-len("_count")]
        url_q = f"rate({ratio}_sum[5m]) / rate({ratio}_count[5m])"
        for r in query(prometheus.port, url_q, at):
            by_hand[(r["metric"]["layer"], r["metric"]["sublayer"])] = float(r["value"][1])
        for r in query(prometheus.port, RECORD, at):
            key = (r["metric"]["layer"], r["metric"]["sublayer"])
            got = float(r["value"][1])
            want = by_hand.get(key)
            if want is None or not math.isclose(got, want, rel_tol=1e-6):
                failures.append(f"{key}: recorded {got}, by hand {want}")

        # The job-level rule pools the (single) instance: the same values.
        if not query(prometheus.port, JOB_RECORD):
            failures.append(f"no {JOB_RECORD}")

        for f in failures:
            print(f"FAIL {f}")
        if failures:
            return 1
        print(f"prometheus_e2e: PASS ({time.monotonic() - started:.1f} s)")
        return 0
    finally:
        if prometheus:
            prometheus.stop()
        if server:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
