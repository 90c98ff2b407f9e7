# Shared by the shell tests: source it, then call ok/fail per check and finish at the end
# (prints the count, exits non-zero on any failure). Runs in a fresh temporary directory
# ($work) that is removed on exit; add more clean-up with `on_exit "command"`.
work=$(mktemp -d)
chmod 0755 "$work"
failures=0
cleanup="rm -rf '$work'"
trap 'eval "$cleanup"' EXIT
# a test ended by a signal (CTest's timeout, Ctrl-C) still cleans up: the EXIT trap runs
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
on_exit() { cleanup="$1; $cleanup"; trap 'eval "$cleanup"' EXIT; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
# same_rows A B [COLUMNS] [FROM_A] [FROM_B]: two metrics.csv files hold the same values in
# COLUMNS (cut's list, default 1,2: step and loss) from line FROM_A of A and FROM_B of B
# (default 2: after the header) to their ends, and at least one such row: a missing,
# empty or header-only file fails, whatever the other holds.
same_rows() {
  local cols=${3:-1,2} a b
  a=$(sed -n "${4:-2},\$p" "$1" 2>/dev/null | cut -d, -f"$cols")
  b=$(sed -n "${5:-2},\$p" "$2" 2>/dev/null | cut -d, -f"$cols")
  [ -n "$a" ] && [ "$a" = "$b" ]
}
# all_equal N VALUES...: exactly N values were given, none empty, all the same (a
# comparison of values parsed from logs fails when the parsing found nothing).
all_equal() {
  local n=$1
  shift
  [ $# -eq "$n" ] && [ -n "$1" ] || return 1
  local v
  for v in "$@"; do [ "$v" = "$1" ] || return 1; done
}
finish() {
  echo "$failures failure(s)"
  [ "$failures" -eq 0 ]
  exit
}
