#!/usr/bin/env python3
"""An HTTP attack benchmark for tributary-server's OpenAI-compatible port.

Measures whether ordinary requests are still served while hostile
connections are held open: slowloris heads, header floods, bad
Content-Lengths. Python 3 standard library only. A benchmark, not a test:
it reports and asserts nothing.

Phases, one after the other:
  1. baseline: closed-loop samples of GET /health and of a 1-token
     completion (POST /v1/completions, "ROMEO:", max_tokens 1), alternated,
     with nothing else open; the server's RSS before;
  2. burst: 512 TCP connections opened as fast as possible, then GET /health
     sent on each (a small listen backlog resets or drops them);
  3. attack: a child process (one thread, one selector) holds open
     slowloris connections, header floods and, with --bad-length, bodies
     announced with a bad Content-Length; once they are open, the same
     samples are taken again, then the burst again;
  4. recovery: the attack is stopped; how long until /health answers again.

Every sample is a fresh TCP connection (connect, request with
"Connection: close", the whole response): what a new client meets. A
sample's latency runs from before connect() to the response's last byte;
one that fails (timeout, reset, refused, closed, not 200) counts in the
percentiles at the time it took (a timeout at --timeout), and apart as a
failure. Samples of one phase stop at --samples each or after --duration
seconds, whichever is first (so a server that times every sample out still
ends in time).

The attacker runs in its own process so that its work does not hold the
samplers' interpreter lock; its CPU time is reported, since on a small
machine it shares the cores with the server.
"""

import argparse
import errno
import heapq
import json
import multiprocessing
import os
import platform
import resource
import selectors
import socket
import threading
import time

HEADER_END = b"\r\n\r\n"


# --------------------------------------------------------------------------
# The server process, read from /proc.

def read_proc_status(pid):
    """VmRSS, VmHWM (KiB) and Threads of pid, or None."""
    if not pid:
        return None
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0])
                elif key == "Threads":
                    out[key] = int(value)
    except OSError:
        return None
    try:
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        pass
    return out


def read_proc_cpu(pid):
    """User + system CPU seconds of pid, or None."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def mib(kib):
    return None if kib is None else kib / 1024.0


class Monitor(threading.Thread):
    """Samples the server's RSS (10 Hz) and collects the attacker's reports.

    It also pauses the header floods while the server's RSS is above
    --rss-cap-mib (these machines are shared: a server that keeps every
    header line could take all of their memory).
    """

    def __init__(self, pid, rss_cap_kib, pause_event, interval=0.1):
        super().__init__(daemon=True)
        self.pid, self.rss_cap_kib, self.pause = pid, rss_cap_kib, pause_event
        self.interval = interval
        self.lock = threading.Lock()
        self.peak_kib = None
        self.last = None
        self.timeline = []       # one row a second: t, rss, threads, fds, attack
        self.cap_hits = 0
        self.report_conn = None  # the attacker's report pipe, while it runs
        self.attack_reports = []
        self.stopping = threading.Event()
        self.t0 = time.monotonic()

    def reset_peak(self):
        with self.lock:
            self.peak_kib = self.last["VmRSS"] if self.last else None

    def run(self):
        next_row = 0.0
        while not self.stopping.is_set():
            st = read_proc_status(self.pid)
            now = time.monotonic() - self.t0
            report = None
            conn = self.report_conn
            if conn is not None:
                try:
                    while conn.poll():
                        report = conn.recv()
                        self.attack_reports.append(report)
                except (EOFError, OSError):
                    pass
            with self.lock:
                if st and "VmRSS" in st:
                    self.last = st
                    rss = st["VmRSS"]
                    if self.peak_kib is None or rss > self.peak_kib:
                        self.peak_kib = rss
                    if self.rss_cap_kib:
                        if rss > self.rss_cap_kib and not self.pause.is_set():
                            self.pause.set()
                            self.cap_hits += 1
                        elif rss < 0.9 * self.rss_cap_kib and self.pause.is_set():
                            self.pause.clear()
                if now >= next_row:
                    row = {"t_s": round(now, 2)}
                    if st:
                        row.update({"rss_mib": round(mib(st.get("VmRSS")), 1),
                                    "threads": st.get("Threads"),
                                    "fds": st.get("fds")})
                    if conn is not None and self.attack_reports:
                        row["attack_open"] = self.attack_reports[-1]["open_total"]
                    self.timeline.append(row)
                    next_row = now + 1.0
            time.sleep(self.interval)


# --------------------------------------------------------------------------
# Samples: one request on a fresh connection, blocking, with a deadline.

class SampleFailure(Exception):
    def __init__(self, kind):
        super().__init__(kind)
        self.kind = kind


def classify_oserror(e):
    if isinstance(e, (socket.timeout, TimeoutError)):
        return "timeout"
    if isinstance(e, ConnectionRefusedError):
        return "refused"
    if isinstance(e, (ConnectionResetError, BrokenPipeError,
                      ConnectionAbortedError)):
        return "reset"
    if getattr(e, "errno", None) in (errno.ECONNRESET, errno.EPIPE):
        return "reset"
    if getattr(e, "errno", None) == errno.ECONNREFUSED:
        return "refused"
    if getattr(e, "errno", None) == errno.ETIMEDOUT:
        return "timeout"
    return "other"


def one_request(host, port, request, timeout):
    """Sends request on a new connection; returns (status, body) or raises
    SampleFailure."""
    deadline = time.monotonic() + timeout

    def remaining():
        left = deadline - time.monotonic()
        if left <= 0:
            raise SampleFailure("timeout")
        return left

    try:
        s = socket.create_connection((host, port), timeout=remaining())
    except OSError as e:
        raise SampleFailure(classify_oserror(e))
    try:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.settimeout(remaining())
        s.sendall(request)
        buf = b""
        while HEADER_END not in buf:
            s.settimeout(remaining())
            chunk = s.recv(65536)
            if not chunk:
                raise SampleFailure("closed")
            buf += chunk
        head, _, body = buf.partition(HEADER_END)
        lines = head.split(b"\r\n")
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError):
            raise SampleFailure("bad_response")
        length = None
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v.strip())
        while length is None or len(body) < length:
            s.settimeout(remaining())
            chunk = s.recv(65536)
            if not chunk:
                if length is None:
                    break
                raise SampleFailure("closed")
            body += chunk
        return status, body
    except SampleFailure:
        raise
    except OSError as e:
        raise SampleFailure(classify_oserror(e))
    finally:
        s.close()


def http_request(method, path, host, body=None):
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
    if body is not None:
        head += ("Content-Type: application/json\r\n"
                 f"Content-Length: {len(body)}\r\n")
    return head.encode() + b"\r\n" + (body or b"")


def percentile(sorted_values, q):
    """Nearest rank."""
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1,
                   int(-(-q * len(sorted_values) // 1)) - 1))
    return sorted_values[k]


def summarize(samples):
    """samples: list of (ms, failure kind or None)."""
    all_ms = sorted(ms for ms, _ in samples)
    ok_ms = sorted(ms for ms, f in samples if f is None)
    failures = {}
    for _, f in samples:
        if f is not None:
            failures[f] = failures.get(f, 0) + 1
    r = lambda v: None if v is None else round(v, 3)
    return {
        "samples": len(samples),
        "ok": len(ok_ms),
        "failures": sum(failures.values()),
        "failure_kinds": failures,
        "p50_ms": r(percentile(all_ms, 0.50)),
        "p99_ms": r(percentile(all_ms, 0.99)),
        "max_ms": r(all_ms[-1] if all_ms else None),
        "ok_p50_ms": r(percentile(ok_ms, 0.50)),
        "ok_p99_ms": r(percentile(ok_ms, 0.99)),
        "ok_max_ms": r(ok_ms[-1] if ok_ms else None),
    }


def run_samples(args, model, n, duration):
    """Alternates /health and 1-token completions, n each or duration s."""
    health = http_request("GET", "/health", args.host)
    body = json.dumps({"model": model, "prompt": "ROMEO:",
                       "max_tokens": 1}).encode()
    completion = http_request("POST", "/v1/completions", args.host, body)
    out = {"health": [], "completion": []}
    end = time.monotonic() + duration
    while (len(out["health"]) < n or len(out["completion"]) < n) and \
            time.monotonic() < end:
        for name, req in (("health", health), ("completion", completion)):
            if len(out[name]) >= n or time.monotonic() >= end:
                continue
            t = time.monotonic()
            failure = None
            try:
                status, _ = one_request(args.host, args.port, req, args.timeout)
                if status != 200:
                    failure = f"http_{status}"
            except SampleFailure as e:
                failure = e.kind
            out[name].append(((time.monotonic() - t) * 1000.0, failure))
    return {name: summarize(v) for name, v in out.items()}


# --------------------------------------------------------------------------
# The burst: many connections at once, then GET /health on each.

def burst(args, count):
    sel = selectors.DefaultSelector()
    request = http_request("GET", "/health", args.host)
    t0 = time.monotonic()
    conns = {}
    result = {}

    def finish(s, outcome):
        c = conns.pop(s)
        try:
            sel.unregister(s)
        except (KeyError, ValueError):
            pass
        s.close()
        result[outcome] = result.get(outcome, 0) + 1
        if outcome == "ok_200":
            c["done"] = time.monotonic() - t0
            latencies.append(c["done"] - c["sent"])

    latencies = []
    connect_ms = []  # when each connect completed, from the first connect()
    # Every connect() first, as fast as the loop runs.
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        err = s.connect_ex((args.host, args.port))
        if err not in (0, errno.EINPROGRESS):
            s.close()
            k = "refused" if err == errno.ECONNREFUSED else "connect_error"
            result[k] = result.get(k, 0) + 1
            continue
        conns[s] = {"state": "connecting", "buf": b"", "sent": None}
        sel.register(s, selectors.EVENT_WRITE)
    opened_s = time.monotonic() - t0
    deadline = t0 + args.timeout
    # Wait for the connects to complete (or fail), then send on each.
    while time.monotonic() < deadline and \
            any(c["state"] == "connecting" for c in conns.values()):
        for key, _ in sel.select(timeout=max(0, deadline - time.monotonic())):
            s = key.fileobj
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                finish(s, {errno.ECONNREFUSED: "refused",
                           errno.ECONNRESET: "reset",
                           errno.ETIMEDOUT: "connect_timeout"}.get(err, "connect_error"))
                continue
            conns[s]["state"] = "connected"
            connect_ms.append((time.monotonic() - t0) * 1000.0)
            sel.unregister(s)  # watched again once its request is sent
    connected_s = time.monotonic() - t0
    for s, c in list(conns.items()):
        if c["state"] == "connecting":
            finish(s, "connect_timeout")
            continue
        try:
            s.send(request)
            c["sent"] = time.monotonic() - t0
            c["state"] = "sent"
            sel.register(s, selectors.EVENT_READ)
        except OSError as e:
            finish(s, classify_oserror(e))
    deadline = time.monotonic() + args.timeout
    while conns and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=max(0, deadline - time.monotonic())):
            s = key.fileobj
            c = conns[s]
            try:
                chunk = s.recv(65536)
            except OSError as e:
                finish(s, classify_oserror(e))
                continue
            if not chunk:
                finish(s, "closed" if not c["buf"] else status_outcome(c["buf"]))
                continue
            c["buf"] += chunk
            if HEADER_END in c["buf"]:
                finish(s, status_outcome(c["buf"]))
    for s in list(conns):
        finish(s, "response_timeout")
    sel.close()
    latencies.sort()
    connect_ms.sort()
    return {
        "connections": count,
        "outcomes": result,
        "ok_200": result.get("ok_200", 0),
        "all_connects_issued_ms": round(opened_s * 1000, 1),
        "connects_settled_ms": round(connected_s * 1000, 1),
        "connected": len(connect_ms),
        "connect_p50_ms": round(percentile(connect_ms, 0.5), 1) if connect_ms else None,
        "connect_max_ms": round(connect_ms[-1], 1) if connect_ms else None,
        # A SYN dropped by a full listen queue is sent again after 1 s.
        "connects_after_1s": sum(1 for v in connect_ms if v >= 1000.0),
        "ok_p50_ms": round(percentile(latencies, 0.5), 2) if latencies else None,
        "ok_max_ms": round(latencies[-1], 2) if latencies else None,
        "wall_s": round(time.monotonic() - t0, 2),
    }


def status_outcome(buf):
    try:
        code = int(buf.split(b"\r\n", 1)[0].split()[1])
    except (IndexError, ValueError):
        return "bad_response"
    return "ok_200" if code == 200 else f"http_{code}"


# --------------------------------------------------------------------------
# The attacker: one thread, one selector, in its own process.

SLOW_BYTES = b"X-a: b\r\n"     # sent one byte a second, cycling: never ends
BAD_LENGTHS = (b"-1", b"99999999999999999999", b"5000000000")


class AttackConn:
    __slots__ = ("kind", "idx", "sock", "state", "t_connect", "sent",
                 "first", "status", "variant", "slow_pos", "done_sending",
                 "label")

    def __init__(self, kind, idx):
        self.kind, self.idx = kind, idx
        self.sock = None
        self.state = "idle"
        self.t_connect = 0.0
        self.sent = 0
        self.first = b""
        self.status = None
        self.variant = idx
        self.slow_pos = 0
        self.done_sending = False
        self.label = ""


def interleave(counts):
    """The kinds in an order that spreads every kind over the whole list (so
    that a fixed thread pool sees a mix, whatever its size)."""
    keys = []
    for kind, n in counts.items():
        for j in range(n):
            keys.append(((j + 0.5) / n, kind, j))
    keys.sort()
    return [(kind, j) for _, kind, j in keys]


def attacker_main(args, stop_event, pause_event, report_conn):
    try:
        Attacker(args, stop_event, pause_event, report_conn).run()
    except KeyboardInterrupt:
        pass


class Attacker:
    def __init__(self, args, stop_event, pause_event, report_conn):
        self.args = args
        self.stop, self.pause, self.report = stop_event, pause_event, report_conn
        self.sel = selectors.DefaultSelector()
        self.addr = (args.host, args.port)
        counts = {"slowloris": args.slowloris, "flood": args.floods,
                  "bad_length": args.bad_length}
        counts = {k: v for k, v in counts.items() if v > 0}
        self.order = interleave(counts)
        self.conns = [AttackConn(k, j) for k, j in self.order]
        self.stats = {k: {"configured": v, "connects": 0, "connected": 0,
                          "open": 0, "peak_open": 0, "closed_by_server": 0,
                          "reset_by_server": 0, "refused": 0,
                          "connect_timeout": 0, "connect_error": 0,
                          "responses": {}, "bytes_sent": 0,
                          "floods_completed": 0}
                      for k, v in counts.items()}
        self.close_after = {k: [] for k in counts}  # s from connect to close
        self.timers = []  # heap of (time, seq, conn, what)
        self.seq = 0
        self.flood = None
        if args.floods:
            lines = b"".join(b"X-H%07d: v\r\n" % i
                             for i in range(args.flood_lines))
            self.flood = memoryview(b"GET /v1/models HTTP/1.1\r\n" + lines + b"\r\n")
        self.paused_floods = []

    def at(self, when, conn, what):
        self.seq += 1
        heapq.heappush(self.timers, (when, self.seq, conn, what))

    # -- connection life --
    def connect(self, c):
        st = self.stats[c.kind]
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        st["connects"] += 1
        err = s.connect_ex(self.addr)
        if err not in (0, errno.EINPROGRESS):
            s.close()
            st["refused" if err == errno.ECONNREFUSED else "connect_error"] += 1
            self.at(time.monotonic() + self.args.reconnect_delay, c, "connect")
            return
        c.sock, c.state, c.t_connect = s, "connecting", time.monotonic()
        c.sent, c.first, c.status, c.slow_pos = 0, b"", None, 0
        c.done_sending = False
        self.sel.register(s, selectors.EVENT_WRITE, c)
        self.at(c.t_connect + self.args.timeout, c, "connect_deadline")

    def drop(self, c, reason):
        """The connection ended; reason: 'server' (EOF), 'reset', or a
        connect failure. Reconnects after --reconnect-delay."""
        st = self.stats[c.kind]
        if c.state == "open":
            st["open"] -= 1
        if reason in ("server", "reset"):
            st["closed_by_server"] += 1
            self.close_after[c.kind].append(time.monotonic() - c.t_connect)
            if reason == "reset":
                st["reset_by_server"] += 1
            key = c.label + (c.status or (
                "(reset, no response)" if reason == "reset"
                else "(closed, no response)"))
            st["responses"][key] = st["responses"].get(key, 0) + 1
        elif reason in st:
            st[reason] += 1
        if c.sock is not None:
            try:
                self.sel.unregister(c.sock)
            except (KeyError, ValueError):
                pass
            c.sock.close()
        c.sock, c.state = None, "idle"
        if c in self.paused_floods:
            self.paused_floods.remove(c)
        if not self.stop.is_set():
            self.at(time.monotonic() + self.args.reconnect_delay, c, "connect")

    def on_connected(self, c):
        st = self.stats[c.kind]
        c.state = "open"
        st["connected"] += 1
        st["open"] += 1
        st["peak_open"] = max(st["peak_open"], st["open"])
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if c.kind == "slowloris":
            self.send(c, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n")
            if c.state == "open":
                self.sel.modify(c.sock, selectors.EVENT_READ, c)
                self.at(time.monotonic() + 1.0, c, "slow_byte")
        elif c.kind == "bad_length":
            v = BAD_LENGTHS[c.variant % len(BAD_LENGTHS)]
            c.variant += 1
            c.label = f"[Content-Length: {v.decode()}] "
            self.send(c, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Length: " + v + b"\r\n\r\n")
            if c.state == "open":
                self.sel.modify(c.sock, selectors.EVENT_READ, c)
        else:
            self.sel.modify(c.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, c)

    def send(self, c, data):
        try:
            n = c.sock.send(data)
        except BlockingIOError:
            return 0
        except OSError:
            self.read_pending(c)
            self.drop(c, "reset")
            return 0
        self.stats[c.kind]["bytes_sent"] += n
        c.sent += n
        return n

    def read_pending(self, c):
        """After a failed send: a response that came before the close."""
        try:
            while True:
                chunk = c.sock.recv(65536)
                if not chunk:
                    break
                self.note_data(c, chunk)
        except OSError:
            pass

    def note_data(self, c, chunk):
        if c.status is None:
            c.first = (c.first + chunk)[:512]
            if b"\r\n" in c.first:
                line = c.first.split(b"\r\n", 1)[0]
                c.status = line.decode("latin-1")[:80]
                st = self.stats[c.kind]
                if c.kind == "flood" and c.done_sending:
                    st["floods_completed"] += 1

    def on_readable(self, c):
        try:
            chunk = c.sock.recv(262144)
        except BlockingIOError:
            return
        except OSError:
            self.drop(c, "reset")
            return
        if not chunk:
            self.drop(c, "server")
            return
        self.note_data(c, chunk)
        # A flood that sent everything and got its answer starts again.
        if c.kind == "flood" and c.done_sending and c.status is not None:
            st = self.stats[c.kind]
            st["responses"][c.status] = st["responses"].get(c.status, 0) + 1
            if c.state == "open":
                st["open"] -= 1
            try:
                self.sel.unregister(c.sock)
            except (KeyError, ValueError):
                pass
            c.sock.close()
            c.sock, c.state = None, "idle"
            self.at(time.monotonic() + self.args.reconnect_delay, c, "connect")

    def on_writable_flood(self, c):
        if self.pause.is_set():
            self.sel.modify(c.sock, selectors.EVENT_READ, c)
            self.paused_floods.append(c)
            return
        self.send(c, self.flood[c.sent:c.sent + 262144])
        if c.state == "open" and c.sent >= len(self.flood):
            c.done_sending = True
            self.sel.modify(c.sock, selectors.EVENT_READ, c)

    # -- the loop --
    def snapshot(self):
        return {"t": time.monotonic(),
                "open_total": sum(s["open"] for s in self.stats.values()),
                "open": {k: s["open"] for k, s in self.stats.items()},
                "floods_paused": len(self.paused_floods)}

    def run(self):
        t0 = time.monotonic()
        # Open at --open-rate a second, interleaved by kind.
        for i, c in enumerate(self.conns):
            self.at(t0 + i / self.args.open_rate, c, "connect")
        next_report = t0
        while not self.stop.is_set():
            now = time.monotonic()
            while self.timers and self.timers[0][0] <= now:
                _, _, c, what = heapq.heappop(self.timers)
                if what == "connect" and c.state == "idle":
                    self.connect(c)
                elif what == "connect_deadline" and c.state == "connecting" \
                        and now - c.t_connect >= self.args.timeout - 1e-3:
                    self.drop(c, "connect_timeout")
                elif what == "slow_byte" and c.state == "open":
                    self.send(c, SLOW_BYTES[c.slow_pos % len(SLOW_BYTES):
                                            c.slow_pos % len(SLOW_BYTES) + 1])
                    c.slow_pos += 1
                    if c.state == "open":
                        self.at(now + 1.0, c, "slow_byte")
            if self.paused_floods and not self.pause.is_set():
                for c in self.paused_floods:
                    if c.state == "open":
                        self.sel.modify(c.sock, selectors.EVENT_READ |
                                        selectors.EVENT_WRITE, c)
                self.paused_floods = []
            if now >= next_report:
                try:
                    self.report.send(self.snapshot())
                except OSError:
                    pass
                next_report = now + 1.0
            timeout = 0.1
            if self.timers:
                timeout = max(0.0, min(timeout, self.timers[0][0] - now))
            for key, mask in self.sel.select(timeout=timeout):
                c = key.data
                if c.sock is None:
                    continue
                if c.state == "connecting":
                    err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        self.drop(c, {errno.ECONNREFUSED: "refused",
                                      errno.ETIMEDOUT: "connect_timeout"}
                                  .get(err, "connect_error"))
                    else:
                        self.on_connected(c)
                    continue
                if mask & selectors.EVENT_READ:
                    self.on_readable(c)
                if c.sock is not None and c.state == "open" and \
                        mask & selectors.EVENT_WRITE and c.kind == "flood":
                    self.on_writable_flood(c)
        final = self.snapshot()
        for c in self.conns:
            if c.sock is not None:
                c.sock.close()
        for kind, v in self.close_after.items():
            v.sort()
            self.stats[kind]["closed_after_s"] = {
                "min": round(v[0], 2), "p50": round(percentile(v, 0.5), 2),
                "max": round(v[-1], 2)} if v else None
        ru = resource.getrusage(resource.RUSAGE_SELF)
        final.update({"final": True, "stats": self.stats,
                      "cpu_user_s": ru.ru_utime, "cpu_sys_s": ru.ru_stime,
                      "wall_s": time.monotonic() - t0})
        self.report.send(final)


# --------------------------------------------------------------------------

def raise_fd_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, need)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def get_model(args):
    status, body = one_request(args.host, args.port,
                               http_request("GET", "/v1/models", args.host),
                               args.timeout)
    if status != 200:
        raise SystemExit(f"attack.py: GET /v1/models answered {status}")
    return json.loads(body)["data"][0]["id"]


def wait_health(args, limit_s):
    """Seconds until GET /health answers 200 (each try up to 1 s), or None."""
    t0 = time.monotonic()
    req = http_request("GET", "/health", args.host)
    while time.monotonic() - t0 < limit_s:
        try:
            status, _ = one_request(args.host, args.port, req,
                                    min(1.0, limit_s))
            if status == 200:
                return round(time.monotonic() - t0, 3)
        except SampleFailure:
            pass
        time.sleep(0.05)
    return None


def fmt_ms(v):
    if v is None:
        return "-"
    return f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def fmt_failures(s):
    if not s["failures"]:
        return "0"
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(s["failure_kinds"].items()))
    return f"{s['failures']} ({kinds})"


def print_report(rep):
    b, a = rep["baseline"], rep["attack"]
    rows = []
    for name, label in (("health", "GET /health"),
                        ("completion", "1-token completion")):
        bs, as_ = b["samples"][name], a["samples"][name]
        rows.append((label, "", ""))
        rows.append(("  samples (ok)", f"{bs['samples']} ({bs['ok']})",
                     f"{as_['samples']} ({as_['ok']})"))
        for key in ("p50_ms", "p99_ms", "max_ms"):
            rows.append((f"  {key.replace('_ms', '')} ms", fmt_ms(bs[key]),
                         fmt_ms(as_[key])))
        rows.append(("  failures", fmt_failures(bs), fmt_failures(as_)))
    if b.get("rss_before_mib") is not None:
        rows.append(("server RSS", "", ""))
        rows.append(("  before MiB", f"{b['rss_before_mib']:.1f}",
                     f"{a['rss_before_mib']:.1f}"))
        rows.append(("  peak growth MiB", f"{b['rss_peak_growth_mib']:+.1f}",
                     f"{a['rss_peak_growth_mib']:+.1f}"))
        rows.append(("  final growth MiB", f"{b['rss_final_growth_mib']:+.1f}",
                     f"{a['rss_final_growth_mib']:+.1f}"))
        rows.append(("  threads / fds at end",
                     f"{b.get('threads_end')} / {b.get('fds_end')}",
                     f"{a.get('threads_end')} / {a.get('fds_end')}"))
    if b.get("server_cpu_s") is not None:
        rows.append(("server CPU s (phase)", f"{b['server_cpu_s']:.2f}",
                     f"{a['server_cpu_s']:.2f}"))
    bb, ab = rep.get("burst"), a.get("burst")
    if bb or ab:
        rows.append((f"burst: {(bb or ab)['connections']} connections", "", ""))
        for label, key in (("  200", "ok_200"),):
            rows.append((label, str(bb[key]) if bb else "-",
                         str(ab[key]) if ab else "-"))
        rows.append(("  other outcomes",
                     outcomes(bb) if bb else "-", outcomes(ab) if ab else "-"))
        rows.append(("  connects taking >= 1 s",
                     str(bb["connects_after_1s"]) if bb else "-",
                     str(ab["connects_after_1s"]) if ab else "-"))
        rows.append(("  wall s", str(bb["wall_s"]) if bb else "-",
                     str(ab["wall_s"]) if ab else "-"))
    w0 = max(len(r[0]) for r in rows) + 2
    w1 = max(max(len(r[1]) for r in rows), len("baseline")) + 2
    print(f"{'':{w0}}{'baseline':{w1}}under attack")
    for r in rows:
        print(f"{r[0]:{w0}}{r[1]:{w1}}{r[2]}")
    print("(percentiles over all samples: a failed one counts at the time it "
          "took, a timeout at --timeout; ok_* in the JSON are over the 200s "
          "only)")
    print()
    att = a.get("attacker", {})
    print(f"attack connections (configured {att.get('configured')}; open when "
          f"sampling started {a.get('open_at_start')}, at the end "
          f"{a.get('open_at_end')}):")
    for kind, st in att.get("kinds", {}).items():
        resp = ", ".join(f"{k!r} {n}" for k, n in
                         sorted(st["responses"].items(), key=lambda x: -x[1])) or "none"
        print(f"  {kind:<11} {st['configured']:>4}: connects {st['connects']}, "
              f"connected {st['connected']}, peak open {st['peak_open']}, open at "
              f"end {st['open']}, closed by the server {st['closed_by_server']} "
              f"(resets {st['reset_by_server']}), refused {st['refused']}, "
              f"connect timeouts {st['connect_timeout']}, "
              f"MiB sent {st['bytes_sent'] / 2**20:.1f}")
        print(f"  {'':<11}       responses / closes: {resp}")
        ca = st.get("closed_after_s")
        if ca:
            print(f"  {'':<11}       closed by the server after (s from "
                  f"connect): min {ca['min']}, p50 {ca['p50']}, max {ca['max']}")
    if att:
        print(f"  attacker CPU {att['cpu_s']:.2f} s in {att['wall_s']:.1f} s "
              f"({100 * att['cpu_s'] / max(att['wall_s'], 1e-9):.0f} % of a "
              f"core); flood pauses at the RSS cap: {a.get('rss_cap_hits', 0)}")
    rec = a.get("recovery_s")
    print("recovery: " + (f"/health answered {rec} s after the attack stopped"
                          if rec is not None else
                          f"/health did not answer in {rep['config']['recovery']} s "
                          "after the attack stopped"))
    if a.get("rss_growth_at_attack_end_mib") is not None:
        print(f"server RSS growth when the attack stopped "
              f"{a['rss_growth_at_attack_end_mib']:+.1f} MiB; the attack column's "
              "peak and final run to 1 s after the recovery")
    print(f"benchmark process CPU (samplers, bursts, monitor): "
          f"{rep['client_cpu_s']:.2f} s")


def outcomes(b):
    o = {k: n for k, n in b["outcomes"].items() if k != "ok_200"}
    return ", ".join(f"{k} {n}" for k, n in sorted(o.items())) or "none"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True, help="the HTTP API port")
    p.add_argument("--server-pid", type=int, default=0,
                   help="the server's pid, for its RSS, threads, fds, CPU")
    p.add_argument("--samples", type=int, default=200,
                   help="samples of each kind a phase (200)")
    p.add_argument("--duration", type=float, default=60.0,
                   help="the most seconds one phase's samples take (60)")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds a sample (or a connect) may take (10)")
    p.add_argument("--slowloris", type=int, default=256,
                   help="connections sending a header byte a second (256)")
    p.add_argument("--floods", type=int, default=64,
                   help="connections writing header lines nonstop (64)")
    p.add_argument("--flood-lines", type=int, default=1_600_000,
                   help="header lines of a flood (1600000: 24 MB)")
    p.add_argument("--bad-length", type=int, nargs="?", const=64, default=0,
                   help="bad-Content-Length connections (off; 64 if no value)")
    p.add_argument("--burst", type=int, default=512,
                   help="connections of the burst check (512; 0 = off)")
    p.add_argument("--open-rate", type=float, default=200.0,
                   help="attack connections opened a second (200)")
    p.add_argument("--ramp", type=float, default=10.0,
                   help="the most seconds to wait for the attack connections "
                        "to be open (10)")
    p.add_argument("--settle", type=float, default=5.0,
                   help="seconds of attack before sampling starts (5)")
    p.add_argument("--reconnect-delay", type=float, default=0.1,
                   help="seconds before an attack connection the server "
                        "closed is opened again (0.1)")
    p.add_argument("--rss-cap-mib", type=float, default=4096,
                   help="pause the floods while the server's RSS is above "
                        "this (4096; 0 = never)")
    p.add_argument("--recovery", type=float, default=30.0,
                   help="the most seconds to wait for /health after the attack")
    p.add_argument("--json", help="write every figure to this file")
    args = p.parse_args()

    attack_conns = args.slowloris + args.floods + args.bad_length
    raise_fd_limit(attack_conns + args.burst + 256)
    pid = args.server_pid
    pause = multiprocessing.Event()
    mon = Monitor(pid, args.rss_cap_mib * 1024, pause)
    mon.start()
    rep = {"config": {k: v for k, v in vars(args).items()},
           "client": {"python": platform.python_version(),
                      "nproc": os.cpu_count(),
                      "loadavg": os.getloadavg(),
                      "samples": "a fresh connection a sample, Connection: close"},
           "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}

    model = get_model(args)
    rep["model"] = model
    run_samples(args, model, 5, 10.0)  # warm-up, not reported

    def phase_begin():
        time.sleep(0.2)
        st = read_proc_status(pid)
        mon.reset_peak()
        return st, read_proc_cpu(pid)

    def phase_end(out, st0, cpu0):
        st1 = read_proc_status(pid)
        if st0 and st1:
            out["rss_before_mib"] = round(mib(st0["VmRSS"]), 1)
            out["rss_peak_growth_mib"] = round(mib(mon.peak_kib - st0["VmRSS"]), 1)
            out["rss_final_growth_mib"] = round(mib(st1["VmRSS"] - st0["VmRSS"]), 1)
            out["vmhwm_mib"] = round(mib(st1.get("VmHWM")), 1)
            out["threads_end"], out["fds_end"] = st1.get("Threads"), st1.get("fds")
        cpu1 = read_proc_cpu(pid)
        if cpu0 is not None and cpu1 is not None:
            out["server_cpu_s"] = round(cpu1 - cpu0, 3)

    # 1. Baseline.
    st0, cpu0 = phase_begin()
    t = time.monotonic()
    base = {"samples": run_samples(args, model, args.samples, args.duration)}
    base["wall_s"] = round(time.monotonic() - t, 2)
    phase_end(base, st0, cpu0)
    rep["baseline"] = base
    # 2. The burst, nothing else open.
    if args.burst:
        rep["burst"] = burst(args, args.burst)
        wait_health(args, args.recovery)

    # 3. Under attack.
    st0, cpu0 = phase_begin()
    stop = multiprocessing.Event()
    recv_end, send_end = multiprocessing.Pipe(duplex=False)
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=attacker_main,
                        args=(args, stop, pause, send_end), daemon=True)
    t_attack = time.monotonic()
    child.start()
    send_end.close()
    mon.report_conn = recv_end
    att = {}
    ramp_end = time.monotonic() + args.ramp
    while time.monotonic() < ramp_end:
        time.sleep(0.2)
        if mon.attack_reports and \
                mon.attack_reports[-1]["open_total"] >= attack_conns:
            break
        if not child.is_alive():
            raise SystemExit("attack.py: the attacker process failed")
    att["ramp_s"] = round(time.monotonic() - t_attack, 2)
    time.sleep(args.settle)
    att["open_at_start"] = (mon.attack_reports[-1]["open_total"]
                            if mon.attack_reports else 0)
    t = time.monotonic()
    att["samples"] = run_samples(args, model, args.samples, args.duration)
    att["wall_s"] = round(time.monotonic() - t, 2)
    if args.burst:
        att["burst"] = burst(args, args.burst)
    att["open_at_end"] = (mon.attack_reports[-1]["open_total"]
                          if mon.attack_reports else 0)
    st = read_proc_status(pid)
    if st and st0:
        att["rss_growth_at_attack_end_mib"] = round(
            mib(st["VmRSS"] - st0["VmRSS"]), 1)
    att["rss_cap_hits"] = mon.cap_hits
    stop.set()
    child.join(30)
    if child.is_alive():
        child.kill()
    final = None
    wait_end = time.monotonic() + 5.0  # the monitor reads the last report
    while final is None and time.monotonic() < wait_end:
        final = next((r for r in reversed(mon.attack_reports)
                      if r.get("final")), None)
        time.sleep(0.1)
    mon.report_conn = None
    if final:
        att["attacker"] = {
            "configured": attack_conns, "kinds": final["stats"],
            "cpu_s": round(final["cpu_user_s"] + final["cpu_sys_s"], 3),
            "cpu_user_s": round(final["cpu_user_s"], 3),
            "cpu_sys_s": round(final["cpu_sys_s"], 3),
            "wall_s": round(final["wall_s"], 2)}
    # 4. Recovery.
    # The figures of the attack phase run to here: the server may go on
    # growing while it reads what the floods left in its sockets.
    att["recovery_s"] = wait_health(args, args.recovery)
    time.sleep(1.0)
    phase_end(att, st0, cpu0)
    pause.clear()
    rep["attack"] = att
    mon.stopping.set()
    rep["timeline"] = mon.timeline
    ru = resource.getrusage(resource.RUSAGE_SELF)
    rep["client_cpu_s"] = round(ru.ru_utime + ru.ru_stime, 3)

    print_report(rep)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rep, f, indent=1)
        print(f"figures: {args.json}")


if __name__ == "__main__":
    main()
