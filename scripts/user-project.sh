#!/usr/bin/env bash
# Install csi-mock as a user would and run examples/user-project against it.
#
#   scripts/user-project.sh [PYTEST ARGS...]
#
# Builds the wheel of this tree, installs it with the harness extra into a fresh
# virtualenv in a temporary directory outside the repository, copies the example
# project next to it and runs its tests there (a local cluster by default: needs root
# and the tools built, which the wheel finds through its own packaged tools/build.sh and the
# shared cache). Nothing from the source tree is importable in that run: a missing
# package file fails here, not on a user's machine. Before that, README's and
# docs/testing.md's runnable examples run against the venv (tests/docs with
# CSI_MOCK_DOCS_PYTHON; $PYTHON needs this tree's dev dependencies). Then
# `csi-harness cluster up`, `status` and `down` from the venv. Exit status: pytest's (5, no tests, is a failure
# too), else the first failing command's.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d /tmp/csi-mock-user-project.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

echo "== user project: wheel of $REPO"
"$PYTHON" -m pip wheel --no-deps --quiet --wheel-dir "$WORK/dist" "$REPO"
wheel=$(ls "$WORK"/dist/csi_mock-*.whl)

echo "== user project: fresh virtualenv in $WORK/venv"
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install --quiet --disable-pip-version-check "${wheel}[harness]" "pytest>=8"

cp -r "$REPO/examples/user-project" "$WORK/project"
unset PYTHONPATH
# The wheel installs csi_mock and csi_harness and no other top-level package: the
# project has a `harness` package of its own, which must be the one it imports.
where=$(cd "$WORK" && "$WORK/venv/bin/python" -c '
import importlib.util, csi_mock, csi_harness
assert importlib.util.find_spec("harness") is None, "the wheel installs a top-level harness"
print(csi_mock.__file__, csi_harness.__file__)')
case "$where" in
  *"$REPO"*) echo "user-project: csi-mock was imported from the source tree: $where" >&2; exit 1 ;;
esac

# README's and docs/testing.md's examples, run by tests/docs as printed in an empty
# directory, but with the venv's interpreter and commands: the wheel, not the tree.
echo "== user project: README.md's and docs/testing.md's examples against the wheel"
(cd "$REPO" && CSI_MOCK_DOCS_PYTHON="$WORK/venv/bin/python" "$PYTHON" -m pytest -q \
  -p no:cacheprovider "tests/docs/test_examples.py::test_the_example_runs_as_printed" \
  -k "README or testing")
cd "$WORK/project"
echo "== user project: pytest in $WORK/project (csi-mock from $WORK/venv)"
status=0
"$WORK/venv/bin/python" -m pytest -p no:cacheprovider --csi-cluster-name csi-user-project "$@" || status=$?
if [[ $status -eq 5 ]]; then
  echo "user-project: pytest collected no tests" >&2
fi
[[ $status -eq 0 ]] || exit "$status"

# The installed commands, as a user runs them by hand.
echo "== user project: csi-mock and csi-harness from the venv"
"$WORK/venv/bin/csi-mock" --version
"$WORK/venv/bin/csi-harness" tools doctor >/dev/null
"$WORK/venv/bin/csi-harness" cluster up --name csi-user-cli
"$WORK/venv/bin/csi-harness" cluster status --name csi-user-cli
"$WORK/venv/bin/csi-harness" cluster down --name csi-user-cli
