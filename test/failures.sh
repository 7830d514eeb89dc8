#!/usr/bin/env bash
# failures.sh FILE: repeat, at the end of a go test log, every "--- FAIL" line with the
# messages of the failed test (file.go:N: lines, two continuation lines each, every line cut to
# 400 characters), so that a long log whose middle is cut still shows what failed and why.
# It prints nothing when nothing failed.
set -euo pipefail
log=${1:?usage: failures.sh FILE}
[ -r "$log" ] || exit 0
awk '
	function cut(s) { return length(s) > 400 ? substr(s, 1, 400) " [...]" : s }
	# A "--- FAIL" line opens a block; its messages are the "file.go:N:" lines one level
	# deeper, each followed by its continuation lines (deeper still).
	/^ *--- FAIL/ {
		if (!header) { print "--- what failed (repeated from above)"; header = 1 }
		match($0, /^ */); indent = RLENGTH; inblock = 1; cont = -1
		print cut($0); next
	}
	inblock {
		match($0, /^ */); ind = RLENGTH
		if (ind <= indent || $0 ~ /^ *--- (PASS|SKIP)/) { inblock = 0; next }
		if (ind == indent + 4 && $0 ~ /^ *[A-Za-z0-9_.-]+\.go:[0-9]+: /) { print cut($0); cont = 0; next }
		if (cont >= 0 && ind > indent + 4 && cont < 2) { print cut($0); cont++ }
	}
' "$log"
