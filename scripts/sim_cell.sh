# Sourced by the evaluation scripts: `sim_cell OUT NAME ARGS...` runs `$VS sim ARGS... --out OUT/NAME` once
# (a cell whose summary.json says complete is skipped, so a script resumes), logs to OUT/NAME.log and prints
# its success line. $VS is the vam-stack command.
sim_cell() {
  local out=$1 name=$2; shift 2
  if [ -f "$out/$name/summary.json" ] && grep -q '"complete": true' "$out/$name/summary.json"; then
    echo "== $name: done already"; return
  fi
  echo "== $name $(date -u +%T)"
  $VS sim "$@" --out "$out/$name" --overwrite > "$out/$name.log" 2>&1
  grep -E "^success" "$out/$name.log" || true
}
