# tests/oci/lab.sh: a private containerd for tests/oci/oci-check and tools/bench-oci, sourced.
#
#   lab_start DIR NS   containerd on DIR/containerd.sock (root and state under DIR, the CRI
#                      plugin off), containerd namespace NS, the busybox test image imported;
#                      sets C (the ctr command line) and IMG; returns 1 with why on stderr
#   lab_stop           its tasks and containers removed, containerd stopped, what the
#                      runtimes keep for NS removed (by its explicit name)
lab_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lab_dir=
lab_ns=
lab_pid=

lab_start() {
	lab_dir=$1 lab_ns=$2
	cat >"$lab_dir/config.toml" <<EOC
version = 2
root = "$lab_dir/root"
state = "$lab_dir/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$lab_dir/containerd.sock"
EOC
	containerd --config "$lab_dir/config.toml" >"$lab_dir/containerd.log" 2>&1 &
	lab_pid=$!
	for _ in $(seq 100); do [ -S "$lab_dir/containerd.sock" ] && break; sleep 0.1; done
	C="ctr -a $lab_dir/containerd.sock -n $lab_ns"
	IMG=localhost/cell-test/busybox:latest
	python3 "$lab_here/mkimage.py" "$lab_dir/busybox.tar" &&
		$C images import "$lab_dir/busybox.tar" >/dev/null ||
		{ echo "containerd or the image: $(tail -3 "$lab_dir/containerd.log")" >&2; return 1; }
}

lab_stop() {
	if [ -n "$lab_pid" ]; then
		for t in $($C task ls -q 2>/dev/null); do
			$C task kill -s KILL "$t" >/dev/null 2>&1
			$C task delete -f "$t" >/dev/null 2>&1
		done
		for c in $($C containers ls -q 2>/dev/null); do $C containers rm "$c" >/dev/null 2>&1; done
		kill "$lab_pid" 2>/dev/null
		wait "$lab_pid" 2>/dev/null
		lab_pid=
	fi
	if [ -n "$lab_ns" ]; then
		rm -rf "/run/containerd/runc/$lab_ns"
		# runc, the control, leaves its namespace's dir in some v1 hierarchies.
		find /sys/fs/cgroup -maxdepth 3 -depth -type d -name "$lab_ns" -exec rmdir {} \; 2>/dev/null
	fi
}
