#!/bin/sh
# Hook of the flock demo (make demo): prints what peer-finder delivers.
#
# stdin: the peers' FQDNs, sorted, one per line, no trailing newline (the
# upstream peer-finder format). Environment: PEER_FINDER_SELF,
# PEER_FINDER_EVENT, PEER_FINDER_GENERATION, PEER_FINDER_PEERS_ADDED/REMOVED
# (space separated).
# The demo sets FLOCK_DEMO_OUT to collect the output of every member.
set -eu
[ -n "${FLOCK_DEMO_OUT:-}" ] && exec >>"$FLOCK_DEMO_OUT" 2>&1

short() { for p in "$@"; do printf ' %s' "${p%%.*}"; done; }

event=on-${PEER_FINDER_EVENT:-${FLOCK_DEMO_EVENT:-change}}
peers=$(cat)
count=$(printf '%s\n' "$peers" | grep -c . || true)
# shellcheck disable=SC2086 # word splitting is the point
echo "$event #${PEER_FINDER_GENERATION:-?}: $count peers:$(short $peers)" \
	"| added:$(short ${PEER_FINDER_PEERS_ADDED:-})" \
	"| removed:$(short ${PEER_FINDER_PEERS_REMOVED:-})"
