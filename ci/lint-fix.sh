#!/usr/bin/env bash
# Applies every automatic lint fix to the work tree (ruff for Python; prettier and eslint for
# TypeScript; src/api.generated.ts generated again from the OpenAPI document), then runs the checks
# of `make lint` and lists what is left to fix by hand.
#
#   bash ci/lint-fix.sh          # from anywhere in the repository; needs `make install` done
#
# Exit status: 0 when the tree is clean afterwards, 1 when errors remain.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${VENV:-$PWD/.venv}
export PATH="$VENV/bin:$PATH"

jlpm install >/dev/null

ruff check --fix --quiet . || true  # what it cannot fix is listed at the end
ruff format --quiet .
jlpm types:generate >/dev/null
jlpm prettier >/dev/null
jlpm eslint:check --fix >/dev/null 2>&1 || true

status=0
echo "== left to fix by hand =="
ruff check --statistics . || status=1
ruff format --check --quiet . || status=1
jlpm prettier:check >/dev/null 2>&1 || { jlpm prettier:check || true; status=1; }
jlpm eslint:check || status=1
jlpm types:check || status=1
exit "$status"
