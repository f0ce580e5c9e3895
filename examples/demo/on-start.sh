#!/bin/sh
# on-start hook of the flock demo: the first delivery; see on-change.sh.
FLOCK_DEMO_EVENT=start exec "$(dirname "$0")/on-change.sh" "$@"
