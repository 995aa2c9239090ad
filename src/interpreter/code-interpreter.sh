#!/bin/sh
# code-interpreter.sh: run cell's code-interpreter service (code_interpreter.py beside this
# file) in the foreground on 127.0.0.1:49999. The image's entrypoint, and the path
# OpenSandbox's clients pass as a sandbox's entrypoint.
#
# Started as root, it makes the state dir (owned by the unprivileged account) and starts
# itself again as that account (setpriv: its uid, gid and groups, no capabilities) before
# anything else runs, so the service and every kernel run as it. Started as anyone else, it
# runs as that user.
#
# It keeps the service up: when the service dies (killed for memory, a crash) it starts it
# again, after 1 s, doubling to at most 60 s while it keeps dying within a minute. SIGTERM
# or SIGINT stop the service (which stops its kernels) and then this script.
#
# Environment: CODE_INTERPRETER_USER (default user), CODE_INTERPRETER_STATE_DIR (default
# /var/lib/code-interpreter), CODE_INTERPRETER_PORT (default 49999),
# CODE_INTERPRETER_PYTHON (default /usr/bin/python3). Arguments go to the service.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
account=${CODE_INTERPRETER_USER:-user}
state=${CODE_INTERPRETER_STATE_DIR:-/var/lib/code-interpreter}
port=${CODE_INTERPRETER_PORT:-49999}
python=${CODE_INTERPRETER_PYTHON:-/usr/bin/python3}

if [ "$(id -u)" = 0 ]; then
	uid=$(id -u "$account" 2>/dev/null) || {
		echo "code-interpreter.sh: no account '$account' to run as" >&2
		exit 1
	}
	gid=$(id -g "$account")
	home=$(getent passwd "$account" | cut -d: -f6)
	[ -d "$state" ] || install -d -m 0700 -o "$uid" -g "$gid" "$state"
	# The dir itself must be the account's, not a link it could have planted.
	[ ! -L "$state" ] && [ "$(stat -c %u "$state")" = "$uid" ] || {
		echo "code-interpreter.sh: $state must be a directory owned by $account" >&2
		exit 1
	}
	[ -d "${home:-/}" ] && cd "${home:-/}" || cd /
	exec setpriv --reuid="$uid" --regid="$gid" --init-groups --inh-caps=-all \
		env HOME="${home:-/}" USER="$account" LOGNAME="$account" \
		PATH="${PATH:-/usr/local/bin:/usr/bin:/bin}" \
		CODE_INTERPRETER_STATE_DIR="$state" CODE_INTERPRETER_PORT="$port" \
		CODE_INTERPRETER_PYTHON="$python" \
		/bin/sh "$here/code-interpreter.sh" "$@"
fi

child=''
stopping=''
stop() {
	stopping=1
	[ -z "$child" ] || kill -TERM "$child" 2>/dev/null || true
}
trap stop TERM INT

delay=1
while :; do
	started=$(date +%s)
	"$python" "$here/code_interpreter.py" --state-dir "$state" --port "$port" "$@" &
	child=$!
	# wait returns early when a trapped signal arrives: wait again for the service itself.
	rc=0
	wait "$child" || rc=$?
	while [ -n "$stopping" ] && kill -0 "$child" 2>/dev/null; do
		wait "$child" || true
	done
	[ -z "$stopping" ] || exit 0
	[ "$rc" != 0 ] || exit 0 # it stopped on its own, cleanly
	[ $(($(date +%s) - started)) -lt 60 ] || delay=1
	echo "code-interpreter.sh: the service exited (status $rc); starting it again in ${delay} s" >&2
	sleep "$delay" &
	child=$!
	wait "$child" || true
	[ -z "$stopping" ] || exit 0
	[ "$delay" -ge 60 ] || delay=$((delay * 2))
	[ "$delay" -le 60 ] || delay=60
done
