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
# It runs in any image with Python 3 and ipykernel (celld binds it at /opt/code-interpreter
# of an image that lacks it): the account is CODE_INTERPRETER_USER, else `user`, else the
# image's first account with a uid from 1000 to 59999, else uid and gid 1000 with no name
# (HOME under the state dir); the python is CODE_INTERPRETER_PYTHON, else the first of
# /usr/bin/python3 and PATH's python3 that has ipykernel, else the first there is.
#
# Environment: CODE_INTERPRETER_USER, CODE_INTERPRETER_STATE_DIR (default
# /var/lib/code-interpreter), CODE_INTERPRETER_PORT (default 49999),
# CODE_INTERPRETER_PYTHON. Arguments go to the service.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
state=${CODE_INTERPRETER_STATE_DIR:-/var/lib/code-interpreter}
port=${CODE_INTERPRETER_PORT:-49999}

pick_python() {
	[ -z "${CODE_INTERPRETER_PYTHON:-}" ] || {
		echo "$CODE_INTERPRETER_PYTHON"
		return
	}
	first=''
	for p in /usr/bin/python3 $(command -v python3 2>/dev/null || true); do
		[ -x "$p" ] || continue
		[ -n "$first" ] || first=$p
		if "$p" -c 'import importlib.util as u, sys
sys.exit(not (u.find_spec("ipykernel") and u.find_spec("jupyter_client")))' 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	[ -n "$first" ] || {
		echo "code-interpreter.sh: no python3 in this image (/usr/bin or PATH)" >&2
		exit 1
	}
	echo "$first"
}

# The account from the image's /etc/passwd: "name uid gid home", or nothing.
pick_account() {
	awk -F: -v want="${CODE_INTERPRETER_USER:-}" '
		want != "" { if ($1 == want) { print $1, $3, $4, $6; found = 1; exit } next }
		$1 == "user" { print $1, $3, $4, $6; found = 1; exit }
		!first && $3 >= 1000 && $3 < 60000 { first = $1 " " $3 " " $4 " " $6 }
		END { if (!found && want == "" && first) print first }' /etc/passwd 2>/dev/null || true
}

python=$(pick_python)

if [ "$(id -u)" = 0 ]; then
	account=$(pick_account)
	if [ -z "$account" ] && [ -n "${CODE_INTERPRETER_USER:-}" ]; then
		echo "code-interpreter.sh: no account '$CODE_INTERPRETER_USER' to run as" >&2
		exit 1
	fi
	[ -n "$account" ] || account="- 1000 1000 $state/home"
	name=${account%% *}
	rest=${account#* }
	uid=${rest%% *}
	rest=${rest#* }
	gid=${rest%% *}
	home=${rest#* }
	[ -d "$state" ] || install -d -m 0700 -o "$uid" -g "$gid" "$state"
	# The dir itself must be the account's, not a link it could have planted.
	[ ! -L "$state" ] && [ "$(stat -c %u "$state")" = "$uid" ] || {
		echo "code-interpreter.sh: $state must be a directory owned by uid $uid" >&2
		exit 1
	}
	if [ "$name" = - ]; then
		echo "code-interpreter.sh: no account to run as in this image; running as uid $uid" >&2
		[ -d "$home" ] || install -d -m 0700 -o "$uid" -g "$gid" "$home"
		name=$uid
	fi
	[ -d "${home:-/}" ] && cd "${home:-/}" || cd /
	set -- env HOME="${home:-/}" USER="$name" LOGNAME="$name" \
		PATH="${PATH:-/usr/local/bin:/usr/bin:/bin}" \
		CODE_INTERPRETER_STATE_DIR="$state" CODE_INTERPRETER_PORT="$port" \
		CODE_INTERPRETER_PYTHON="$python" \
		/bin/sh "$here/code-interpreter.sh" "$@"
	if command -v setpriv >/dev/null 2>&1; then
		groups=--init-groups
		[ "$name" != "$uid" ] || groups=--clear-groups
		exec setpriv --reuid="$uid" --regid="$gid" "$groups" --inh-caps=-all "$@"
	fi
	# No setpriv (an image without util-linux): python drops to the account. Leaving root
	# clears the permitted and effective capabilities.
	exec "$python" -c 'import os, pwd, sys
uid, gid = int(sys.argv[1]), int(sys.argv[2])
try:
    os.initgroups(pwd.getpwuid(uid).pw_name, gid)
except KeyError:
    os.setgroups([])
os.setgid(gid)
os.setuid(uid)
os.execvp(sys.argv[3], sys.argv[3:])' "$uid" "$gid" "$@"
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
