# Sourced by scripts/*: create .venv if needed and install minikafka with the given extras.
# Re-installs only when pyproject.toml changed (a stamp file records its hash).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="${PYTHON:-python3}"
extras="${1:-}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "creating $VENV" >&2
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >&2
fi
stamp="$VENV/.minikafka-installed${extras:+-$extras}"
want="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "installing minikafka${extras:+[$extras]} into $VENV" >&2
  "$VENV/bin/python" -m pip install -q -e "$ROOT${extras:+[$extras]}" >&2
  echo "$want" > "$stamp"
fi
