#!/bin/sh
# code-interpreter.sh: start cell's code-interpreter service (code_interpreter.py beside
# this file) in the foreground on 127.0.0.1:49999. The image's entrypoint, and the path
# OpenSandbox's clients pass as a sandbox's entrypoint.
#
# Started as root, it makes the state dir (owned by the unprivileged account) and drops to
# that account before anything else runs, so the service and every kernel run as it.
# Started as anyone else, it runs as that user.
#
# Environment: CODE_INTERPRETER_USER (default user), CODE_INTERPRETER_STATE_DIR (default
# /var/lib/code-interpreter), CODE_INTERPRETER_PORT (default 49999),
# CODE_INTERPRETER_PYTHON (default /usr/bin/python3). Extra arguments go to the service.
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
	# Never follow a link the account could have planted: the dir itself must be its.
	[ ! -L "$state" ] && [ "$(stat -c %u "$state")" = "$uid" ] || {
		echo "code-interpreter.sh: $state must be a directory owned by $account" >&2
		exit 1
	}
	cd "${home:-/}" 2>/dev/null || cd /
	exec setpriv --reuid="$uid" --regid="$gid" --init-groups --inh-caps=-all \
		env -u CODE_INTERPRETER_USER HOME="${home:-/}" USER="$account" LOGNAME="$account" \
		SHELL=/bin/bash PATH="${PATH:-/usr/local/bin:/usr/bin:/bin}" \
		"$python" "$here/code_interpreter.py" --state-dir "$state" --port "$port" "$@"
fi
exec "$python" "$here/code_interpreter.py" --state-dir "$state" --port "$port" "$@"
