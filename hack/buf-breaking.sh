#!/usr/bin/env bash
# Checks the API for breaking changes (buf FILE rules) against main, or,
# when HEAD is main itself, against the commit before it. Skips when the
# base has no API yet. BUF_BREAKING_AGAINST=<git ref> overrides the base.
set -euo pipefail
buf=${1:-bin/buf}
cd "$(git rev-parse --show-toplevel)"

base=${BUF_BREAKING_AGAINST:-}
if [[ -z $base ]]; then
  if git rev-parse -q --verify refs/heads/main >/dev/null &&
     [[ $(git rev-parse HEAD) != $(git rev-parse refs/heads/main) ]]; then
    base=main
  elif git rev-parse -q --verify HEAD~1 >/dev/null; then
    base=HEAD~1
  else
    echo "buf breaking: no base commit, skipped"; exit 0
  fi
fi
if ! git cat-file -e "$base:proto/switchyard" 2>/dev/null; then
  echo "buf breaking: $base has no proto/switchyard yet, skipped"; exit 0
fi
commit=$(git rev-parse "$base")
echo "buf breaking against $base ($commit)"
"$buf" breaking --against ".git#ref=$commit"
