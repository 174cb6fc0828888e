#!/usr/bin/env bash
# hadolint (from the pinned tools venv) on the Dockerfile, failing on any
# finding, info level included. Its bundled ShellCheck also checks the RUN
# lines.
#   check_dockerfile.sh VENV_DIR REPO_DIR
set -euo pipefail
hadolint=$1/bin/hadolint
[ -x "$hadolint" ] || {
  echo "check_dockerfile: $hadolint not found: the deploy_tools_venv test installs it" >&2
  exit 1
}
"$hadolint" --version
"$hadolint" --failure-threshold info "$2/Dockerfile"
echo "check_dockerfile: $2/Dockerfile clean"
