#!/usr/bin/env python3
"""The Grafana dashboard parses, and every PromQL expression in it, and in the
Prometheus rules, is valid PromQL (promtool) and refers only to metrics that
a running tributary-server really exports, or to series the recording rules
derive from them.

  check_promql_refs.py --repo DIR --server BIN --client BIN

The exported names come from a real scrape: the test starts the server on
free ports, sends one request that succeeds and one that fails (so that the
labelled counters, errors included, have series), and reads /metrics.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

from tributary_server import TributaryServer, exported_names

# PromQL words that are not metric names (keywords, and aggregations or
# functions written without parentheses right after them are handled by the
# "followed by (" rule below).
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and",
            "or", "unless", "bool", "offset", "inf", "nan", "atan2"}


def grafana_to_promql(expr):
    """Grafana's variables in a query become what Prometheus would get."""
    expr = re.sub(r"\$(__rate_interval|__interval|__range)\b", "5m", expr)
    expr = re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*(:[a-z]+)?\}?", ".*", expr)
    m = re.fullmatch(r"\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\)\s*", expr, re.S)
    return m.group(1) if m else expr


def metric_names(expr):
    s = re.sub(r'"(\\.|[^"\\])*"', '""', expr)             # string literals
    s = re.sub(r"'(\\.|[^'\\])*'", "''", s)
    s = re.sub(r"\{[^{}]*\}", " ", s)                         # label matchers
    s = re.sub(r"\[[^\]]*\]", " ", s)                         # ranges, subqueries
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    s = re.sub(r"\boffset\s+-?\w+", " ", s)
    s = re.sub(r"(?<![\w:])[0-9.]+([eE][+-]?[0-9]+)?", " ", s)  # numbers
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", s):
        word = m.group(0)
        if word.lower() in KEYWORDS or re.match(r"\s*\(", s[m.end():]):
            continue
        names.add(word)
    return names


def dashboard_exprs(dashboard):
    found = []

    def walk(node, where):
        if isinstance(node, dict):
            title = node.get("title", where)
            for key, value in node.items():
                if key == "expr" and isinstance(value, str):
                    found.append((title, value))
                else:
                    walk(value, title)
        elif isinstance(node, list):
            for item in node:
                walk(item, where)

    walk(dashboard.get("panels", []), "panels")
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            found.append((f"variable ${var['name']}", query))
    return found


def check_dashboard_shape(dashboard, errors):
    ids = [p["id"] for p in dashboard["panels"]]
    if len(ids) != len(set(ids)):
        errors.append("dashboard: panel ids are not unique")
    heatmaps = [p for p in dashboard["panels"] if p["type"] == "heatmap"]
    for sub in ("mixer", "ffn"):
        if not any(f'sublayer="{sub}"' in t["expr"] for p in heatmaps for t in p["targets"]):
            errors.append(f"dashboard: no depth x time heatmap for the {sub}")
    for p in dashboard["panels"]:
        if p["type"] != "row" and not p.get("targets"):
            errors.append(f"dashboard: panel {p['title']!r} has no query")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--server", required=True)
    ap.add_argument("--client", required=True)
    args = ap.parse_args()
    if shutil.which("promtool") is None:
        print("check_promql_refs: promtool not found: run ./scripts/install-deps.sh "
              "(Debian package prometheus)", file=sys.stderr)
        return 1

    with TributaryServer(args.server, args.client) as server:
        server.client("generate", "ROMEO:", "--max-new-tokens", "4")
        bad = server.client("generate", "ROMEO:", "--top-p", "1.5", check=False)
        if bad.returncode == 0:
            print("check_promql_refs: an invalid request succeeded", file=sys.stderr)
            return 1
        exported = exported_names(server.scrape())
    print(f"scraped {len(exported)} series names from a running tributary-server")

    errors = []
    dash_path = f"{args.repo}/deploy/grafana/tributary.json"
    with open(dash_path, encoding="utf-8") as f:
        try:
            dashboard = json.load(f)
        except json.JSONDecodeError as e:
            print(f"FAIL {dash_path} does not parse: {e}")
            return 1
    check_dashboard_shape(dashboard, errors)

    rules_dir = f"{args.repo}/deploy/prometheus"
    recorded = {}
    exprs = []  # (where, PromQL)
    for name in ("recording-rules.yaml", "alert-rules.yaml"):
        with open(f"{rules_dir}/{name}", encoding="utf-8") as f:
            for group in yaml.safe_load(f)["groups"]:
                for rule in group["rules"]:
                    where = f"{name}: {rule.get('record') or rule.get('alert')}"
                    exprs.append((where, rule["expr"]))
                    if "record" in rule:
                        recorded[rule["record"]] = rule["expr"]
    for title, expr in dashboard_exprs(dashboard):
        exprs.append((f"dashboard: {title}", grafana_to_promql(expr)))

    known = exported | set(recorded)
    for where, expr in exprs:
        names = metric_names(expr)
        if not names:
            errors.append(f"{where}: no metric found in {expr!r}")
        for n in sorted(names - known):
            errors.append(f"{where}: {n} is neither exported by the server nor recorded")
    print(f"checked {len(exprs)} expressions ({len(recorded)} recording rules)")

    # Syntax: every expression as a recording rule, through promtool.
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump({"groups": [{"name": "syntax", "rules": [
            {"record": f"check:expr_{i}", "expr": e} for i, (_, e) in enumerate(exprs)]}]}, f)
    out = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True)
    os.unlink(f.name)
    if out.returncode != 0:
        errors.append("promtool rejects an expression:\n" + out.stdout + out.stderr)

    for e in errors:
        print(f"FAIL {e}")
    print(f"check_promql_refs: {len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
