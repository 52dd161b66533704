#!/usr/bin/env bash
# Start or stop a Docker engine for the tests.
#   scripts/dockerd.sh start   install docker.io and debootstrap if missing (root, apt), and
#                              start dockerd unless one answers; its PID goes to $PIDFILE
#   scripts/dockerd.sh stop    stop the dockerd this script started (by its PID), if any
set -euo pipefail
PIDFILE=${PIDFILE:-/tmp/srt-mcp-dockerd.pid}
case "${1:-}" in
start)
	if [ "$(id -u)" != 0 ]; then echo "dockerd.sh: not root; skipping the Docker engine"; exit 0; fi
	missing=""
	command -v dockerd >/dev/null || missing="$missing docker.io"
	command -v debootstrap >/dev/null || missing="$missing debootstrap"
	if [ -n "$missing" ]; then
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
	fi
	if docker info >/dev/null 2>&1; then echo "dockerd.sh: an engine is already running"; exit 0; fi
	nohup dockerd >/tmp/srt-mcp-dockerd.log 2>&1 &
	echo $! >"$PIDFILE"
	for _ in $(seq 1 120); do
		docker info >/dev/null 2>&1 && { echo "dockerd.sh: dockerd $(cat "$PIDFILE") is up"; exit 0; }
		sleep 0.5
	done
	echo "dockerd.sh: dockerd did not come up; its log:" >&2
	tail -20 /tmp/srt-mcp-dockerd.log >&2
	exit 1
	;;
stop)
	[ -f "$PIDFILE" ] || exit 0
	pid=$(cat "$PIDFILE")
	rm -f "$PIDFILE"
	kill "$pid" 2>/dev/null || exit 0
	for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.5; done
	kill -9 "$pid" 2>/dev/null || true
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
