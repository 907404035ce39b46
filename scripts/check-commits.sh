#!/usr/bin/env bash
# Every commit since the house style was adopted has a subject of at most 72 characters and, unless
# it is a merge, a body saying why. Run by .ci/run; `bash scripts/check-commits.sh` checks a clone.
set -euo pipefail
cd "$(dirname "$0")/.."
# The last commit before the rule; older subjects are history and stay as they were.
since=8ec9244a35ff0dd473898468ec33488d2ff7e208
if ! git cat-file -e "$since^{commit}" 2>/dev/null; then
  if [[ $(git rev-parse --is-shallow-repository) == true ]]; then
    echo "skipped: check-commits needs the history back to ${since:0:7}, and this clone is shallow"
    exit 0
  fi
  echo "check-commits: ${since:0:7} is not an ancestor in this repository" >&2
  exit 1
fi
bad=0
while IFS= read -r -d '' record; do
  hash=${record%%$'\x1f'*}
  rest=${record#*$'\x1f'}
  parents=${rest%%$'\x1f'*}
  rest=${rest#*$'\x1f'}
  subject=${rest%%$'\x1f'*}
  body=${rest#*$'\x1f'}
  if ((${#subject} > 72)); then
    echo "${hash:0:10}: subject of ${#subject} characters (at most 72): $subject"
    bad=1
  fi
  if [[ $parents != *" "* && -z ${body//[[:space:]]/} ]]; then
    echo "${hash:0:10}: no body saying why: $subject"
    bad=1
  fi
done < <(git log -z --format='%H%x1f%P%x1f%s%x1f%b' "$since..HEAD")
if ((bad)); then
  echo "check-commits: write a subject of at most 72 characters, imperative, and the why in the body" >&2
  exit 1
fi
echo "check-commits: $(git rev-list --count "$since..HEAD") commits since ${since:0:7} keep the house style"
