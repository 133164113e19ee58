#!/bin/bash
# The checker's tests are not blind (issue 33): for each anomaly kind, drop
# it in Report::add, rebuild, and list the crafted-history tests that now
# fail. Every kind must fail at least one test; exits 1 if one does not.
# make checker-mutations (~3 min).
set -u
cd "$(dirname "$0")/.."
blind=0
f=crates/lockstep-history/src/anomaly.rs
orig=$(mktemp)
cp $f "$orig"
trap 'cp "$orig" $f; rm -f "$orig"' EXIT
for k in $(grep -o "AnomalyKind::[A-Za-z0-9]*," crates/lockstep-history/src/anomaly.rs | sort -u | sed "s/AnomalyKind:://; s/,//"); do
  cp "$orig" $f
  python3 - "$k" <<'PY'
import sys
k=sys.argv[1]
p='crates/lockstep-history/src/anomaly.rs'
s=open(p).read()
s=s.replace("    pub fn add(&mut self, anomaly: Anomaly) {\n","    pub fn add(&mut self, anomaly: Anomaly) {\n        if anomaly.kind == AnomalyKind::%s { return; }\n" % k,1)
open(p,'w').write(s)
PY
  failed=$(cargo test --release -p lockstep-history --test anomalies 2>&1 | grep -E "^test .* FAILED$" | sed 's/^test //; s/ \.\.\. FAILED//' | tr '\n' ' ')
  echo "$k removed -> failing: ${failed:-NONE}"
  [[ -n $failed ]] || blind=1
done
exit $blind
