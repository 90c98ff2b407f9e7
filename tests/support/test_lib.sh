# Shared by the shell tests: source it, then call ok/fail per check and finish at the end
# (prints the count, exits non-zero on any failure). Runs in a fresh temporary directory
# ($work) that is removed on exit; add more clean-up with `on_exit "command"`.
work=$(mktemp -d)
chmod 0755 "$work"
failures=0
cleanup="rm -rf '$work'"
trap 'eval "$cleanup"' EXIT
on_exit() { cleanup="$1; $cleanup"; trap 'eval "$cleanup"' EXIT; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
finish() {
  echo "$failures failure(s)"
  [ "$failures" -eq 0 ]
  exit
}
