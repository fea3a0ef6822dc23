# Sourced by the attack scripts (tests/attack/*.sh): how they judge.
#   check WHAT GOT WANT   tests/lib/harness.sh
#   counter NAME          the victim's counter NAME (0 when absent) from
#                         $counters, the line `rocelab run --counters` printed
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
counter() {
  local v
  v=$(echo "$counters" | tr ' ' '\n' | sed -n "s/^$1=//p")
  echo "${v:-0}"
}
