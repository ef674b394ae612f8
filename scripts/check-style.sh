#!/usr/bin/env bash
# Style checks the test command runs before building:
#   1. every C++ file is formatted as .clang-format says (clang-format-14, Google at 100 columns);
#      `scripts/check-style.sh --fix` formats them in place;
#   2. no function outside tests/ is longer than 150 lines.
# Exits 1 and names the offenders if a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
FORMAT=clang-format-14
MAX_FUNCTION_LINES=150

mapfile -t files < <(git ls-files '*.cc' '*.h')
if [ "${1:-}" = "--fix" ]; then
  "$FORMAT" -i "${files[@]}"
fi

status=0
if ! "$FORMAT" --dry-run --Werror "${files[@]}" 2>/tmp/check-style.$$; then
  echo "check-style: these files are not formatted (run scripts/check-style.sh --fix):"
  grep -o '^[^:]*:' /tmp/check-style.$$ | sort -u | sed 's/:$//; s/^/  /'
  status=1
fi
rm -f /tmp/check-style.$$

# A function definition at namespace scope opens on a line at column 0 (its signature may go on
# over indented lines) and closes with a "}" alone at column 0; classes, arrays and namespaces
# close otherwise ("};", "}  // namespace") and are not counted. A member function defined in a
# class body does the same at column 2 (the second pass; there a block of a function counts
# too, but it is shorter than its function, which the first pass measures).
function_lengths() {  # $1: the indentation of the definitions measured
  printf '%s\n' "${files[@]}" | grep -v '^tests/' | xargs awk -v max="$MAX_FUNCTION_LINES" -v pad="$1" '
    FNR == 1 { start = 0; sig = 0 }
    start == 0 && $0 ~ ("^" pad "[A-Za-z_~]") { sig = FNR; sig_text = $0 }
    start == 0 && /\{ *$/ && sig > 0 && sig_text !~ /^(namespace|extern) / {
      start = sig; name = sig_text; next
    }
    start > 0 && $0 == (pad "}") {
      if (FNR - start + 1 > max) printf "  %s:%d: %d lines: %s\n", FILENAME, start, FNR - start + 1, name
      start = 0; sig = 0; next
    }
    start > 0 && ($0 ~ ("^" pad "}") || /^}/) { start = 0; sig = 0 }'
}
long="$(function_lengths '')$(function_lengths '  ')"
if [ -n "$long" ]; then
  echo "check-style: functions longer than $MAX_FUNCTION_LINES lines (split them):"
  echo "$long"
  status=1
fi
exit $status
