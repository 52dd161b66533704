# Prints what each failing test of a `go test -v` log said: with parallel
# tests a test's lines are interleaved with others' under "=== NAME/CONT"
# headers, and a CI summary that shows only the log's tail loses them.
# Usage: awk -f scripts/failures.awk LOG
/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; next }
/^ *--- FAIL: / { t = $3; if (!(t in failed)) { failed[t] = 1; order[++n] = t }; next }
/^ *--- (PASS|SKIP): / { next }
/^    / && cur != "" { lines[cur] = lines[cur] $0 "\n"; count[cur]++ }
END {
	for (i = 1; i <= n; i++) {
		t = order[i]
		if (!(t in count)) continue
		printf "== what %s said (last lines)\n", t
		m = split(lines[t], l, "\n")
		for (j = (m > 41 ? m - 40 : 1); j <= m; j++) if (l[j] != "") print substr(l[j], 1, 400)
	}
}
