#!/usr/bin/env bash
# Side-by-side tables of scripts/compat.sh results:
#   scripts/compat-report.sh OUTDIR SUITE ...  > report.md
# Reads OUTDIR/{galera,lockstep}/<suite>.txt (mtr.sh summaries: "PASS t",
# "FAIL t  (why)  log: dir", "SKIP t  (why)", a closing count line).
set -euo pipefail
OUT=$1; shift

echo "# MariaDB's wsrep suites: Galera and Lockstep"
echo
echo "Made by \`scripts/compat.sh\` on $(date -u +%Y-%m-%d) from the runs below."
echo "A test that passes with Galera and not with Lockstep is a **gap**; each"
echo "one is explained in \`docs/compat/\`."
for suite in "$@"; do
  g=$OUT/galera/$suite.txt l=$OUT/lockstep/$suite.txt
  echo
  echo "## \`$suite\`"
  echo
  for f in "$g" "$l"; do
    if [[ -f $f ]]; then
      sed -n 's/^# suite [^,]*, provider \([a-z]*\), started \(.*\), ended \(.*\)/- \1: \2 to \3/p; s/^# provider: /  library: /p' "$f"
    else
      echo "- no run: $f"
    fi
  done
  echo
  # One row per test (with its combination): result with each provider.
  awk -v G="$g" -v L="$l" '
    function load(file, col,   line, name, res, why) {
      while ((getline line < file) > 0) {
        if (line !~ /^(PASS|FAIL|SKIP) /) continue
        # The big-test pass skips every other test as a "Small test".
        if (line ~ /\(Small test\)/) continue
        res = substr(line, 1, 4); name = substr(line, 6)
        why = ""
        if (index(name, "  (")) { why = substr(name, index(name, "  (") + 3); name = substr(name, 1, index(name, "  (") - 1); sub(/\).*$/, "", why) }
        sub(/  log: .*/, "", name)
        if (!(name in seen)) { seen[name] = 1; names[++n] = name }
        r[name, col] = res; w[name, col] = why
        count[col, res]++
      }
      close(file)
    }
    BEGIN {
      load(G, "g"); load(L, "l")
      printf "| | pass | fail | skip |\n|---|---|---|---|\n"
      printf "| Galera | %d | %d | %d |\n", count["g","PASS"], count["g","FAIL"], count["g","SKIP"]
      printf "| Lockstep | %d | %d | %d |\n\n", count["l","PASS"], count["l","FAIL"], count["l","SKIP"]
      for (i = 1; i <= n; i++) if (r[names[i],"g"] == "PASS" && r[names[i],"l"] != "PASS") gaps++
      printf "Gaps (pass with Galera, not with Lockstep): **%d**.\n\n", gaps
      # sort names
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (names[j] < names[i]) { t = names[i]; names[i] = names[j]; names[j] = t }
      printf "Runs whose result differs between the providers, or that fail with either:\n\n"
      printf "| test | Galera | Lockstep | Lockstep note |\n|---|---|---|---|\n"
      for (i = 1; i <= n; i++) {
        t = names[i]
        if (r[t,"g"] == r[t,"l"] && r[t,"g"] != "FAIL") continue
        row(t)
      }
      printf "\n<details><summary>All %d runs</summary>\n\n", n
      printf "| test | Galera | Lockstep | Lockstep note |\n|---|---|---|---|\n"
      for (i = 1; i <= n; i++) row(names[i])
      printf "\n</details>\n"
    }
    function row(t,   a, b, note) {
      a = r[t,"g"]; b = r[t,"l"]
      if (a == "") a = "-"; if (b == "") b = "-"
      note = (b != "PASS" && b != "-") ? w[t,"l"] : ""
      gsub(/\|/, "/", note)
      printf "| `%s` | %s | %s | %s |\n", t, a, (a == "PASS" && b != "PASS") ? "**" b "**" : b, note
    }'
done
