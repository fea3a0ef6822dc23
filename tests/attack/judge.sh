# Sourced by the attack scripts (tests/attack/*.sh): how they judge.
#   check WHAT GOT WANT   prints "ok: ..." or "FAIL: ..." (and sets status=1)
#   counter NAME          the victim's counter NAME (0 when absent) from
#                         $counters, the line `rocelab run --counters` printed
status=0
check() {
  if [ "$2" = "$3" ]; then echo "ok: $1 = $2"; else echo "FAIL: $1 = '$2', want '$3'"; status=1; fi
}
counter() {
  local v
  v=$(echo "$counters" | tr ' ' '\n' | sed -n "s/^$1=//p")
  echo "${v:-0}"
}
