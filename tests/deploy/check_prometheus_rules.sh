#!/usr/bin/env bash
# `promtool check rules` on deploy/prometheus (syntax, PromQL, templates),
# then `promtool test rules` (the recording rules' values and the alerts on
# synthetic series: deploy/prometheus/rules-test.yaml).
#   check_prometheus_rules.sh REPO_DIR
set -euo pipefail
rules=$1/deploy/prometheus
command -v promtool >/dev/null || {
  echo "check_prometheus_rules: promtool not found: run ./scripts/install-deps.sh (Debian package prometheus)" >&2
  exit 1
}
promtool --version 2>&1 | head -1
promtool check rules "$rules/recording-rules.yaml" "$rules/alert-rules.yaml"
# promtool resolves rule_files relative to the test file's folder.
promtool test rules "$rules/rules-test.yaml"
