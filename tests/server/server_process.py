"""tributary-server as a child process for the Python client tests: started
on free ports (read back from its "listening on" log lines) and stopped with
SIGTERM, which must drain and exit 0. Its log is copied to our stderr by a
thread for the whole run: a pipe nobody reads would fill and block the
server's next log line."""
import re
import signal
import subprocess
import sys
import threading
import time

LISTENERS = {
    "api": re.compile(r"gRPC API listening on [\d.]+:(\d+)"),
    "health": re.compile(r"gRPC health listening on [\d.]+:(\d+)"),
    "http": re.compile(r"HTTP API listening on http://[\d.]+:(\d+)"),
}


class ServerError(Exception):
    pass


def start(binary, model, listeners, port_flags):
    """Starts `binary` with `port_flags` (e.g. ["--port", "0", ...]) and
    returns (process, {listener: port}) once every name in `listeners`
    (keys of LISTENERS) has reported its port, within 60 s."""
    cmd = [binary, "--host", "127.0.0.1", *port_flags, "--threads", "1",
           "--drain-grace", "5"]
    if model:
        cmd += ["--model", model]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    ports = {}
    deadline = time.time() + 60
    while time.time() < deadline and len(ports) < len(listeners):
        line = proc.stderr.readline()
        if not line:
            raise ServerError(f"the server exited early (code {proc.poll()})")
        sys.stderr.write(line)
        for name in listeners:
            m = LISTENERS[name].search(line)
            if m:
                ports[name] = int(m.group(1))
    if len(ports) < len(listeners):
        proc.kill()
        raise ServerError(f"the server reported {sorted(ports)}, not {listeners}")
    threading.Thread(target=lambda: [sys.stderr.write(l) for l in proc.stderr],
                     daemon=True).start()
    return proc, ports


def stop(proc):
    """SIGTERM, then the exit code (the server drains first); kills it and
    raises after 30 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise ServerError("the server did not exit within 30 s of SIGTERM")
