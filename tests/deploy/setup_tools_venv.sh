#!/usr/bin/env bash
# CTest fixture: creates (or reuses) the virtual environment with the pinned
# PyPI tools of the deployment checks (requirements.txt).
#   setup_tools_venv.sh VENV_DIR REQUIREMENTS
# Debian's python3 (with python3-venv, from scripts/install-deps.sh), not
# whatever python3 comes first on the PATH, so that CI and developers get the
# same interpreter. Needs PyPI the first time; reused while requirements.txt
# is unchanged. Build folders share a venv (cmake/TributaryOptions.cmake:
# tributary_tools_venv), so its creation holds a lock beside it: a second
# test run waits, then finds it made.
set -euo pipefail
venv=$1
requirements=$2
python=/usr/bin/python3
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9

fail() { echo "setup_tools_venv: $*" >&2; exit 1; }
[ -x "$python" ] || fail "$python not found: run ./scripts/install-deps.sh"
"$python" -c 'import ensurepip' 2>/dev/null \
  || fail "python3-venv is not installed: run ./scripts/install-deps.sh"

stamp=$venv/.requirements
if [ -x "$venv/bin/python" ] && cmp -s "$requirements" "$stamp"; then
  echo "setup_tools_venv: $venv is up to date"
  exit 0
fi

rm -rf "$venv"
"$python" -m venv "$venv"
# --no-deps: requirements.txt already lists every transitive dependency, so
# nothing unpinned slips in.
if ! "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps \
    -r "$requirements"; then
  rm -rf "$venv"
  fail "pip install -r $requirements failed (is PyPI reachable?)"
fi
"$venv/bin/pip" check --disable-pip-version-check \
  || fail "the pinned requirements are inconsistent (pip check)"
cp "$requirements" "$stamp"
"$venv/bin/pip" freeze --disable-pip-version-check
echo "setup_tools_venv: created $venv"
