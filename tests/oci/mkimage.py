# mkimage.py OUT.tar: a one-layer OCI image archive (oci-layout, index.json, blobs) of the
# host's static busybox and a few applets, named localhost/cell-test/busybox:latest, for
# `ctr images import`: tests/oci's image, built from what the machine has (no registry).
import hashlib, io, json, os, tarfile, sys, time
out = sys.argv[1]
layer = io.BytesIO()
with tarfile.open(fileobj=layer, mode="w") as t:
    for d in ("bin", "tmp", "etc", "proc", "sys", "dev", "root"):
        ti = tarfile.TarInfo(d); ti.type = tarfile.DIRTYPE; ti.mode = 0o755; t.addfile(ti)
    data = open("/bin/busybox", "rb").read()
    ti = tarfile.TarInfo("bin/busybox"); ti.size = len(data); ti.mode = 0o755
    t.addfile(ti, io.BytesIO(data))
    for applet in ("sh", "echo", "sleep", "cat", "id", "ls", "true", "false", "env", "ps", "kill", "grep", "hostname", "head", "tty", "stty", "wc", "dd"):
        ti = tarfile.TarInfo("bin/" + applet); ti.type = tarfile.SYMTYPE; ti.linkname = "busybox"; t.addfile(ti)
    pw = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n"
    ti = tarfile.TarInfo("etc/passwd"); ti.size = len(pw); ti.mode = 0o644; t.addfile(ti, io.BytesIO(pw))
layer = layer.getvalue()
def blob(b): return "sha256:" + hashlib.sha256(b).hexdigest()
config = json.dumps({"architecture": "amd64", "os": "linux",
    "config": {"Env": ["PATH=/bin"], "Cmd": ["sh"]},
    "rootfs": {"type": "layers", "diff_ids": [blob(layer)]}}).encode()
manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": blob(config), "size": len(config)},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": blob(layer), "size": len(layer)}]}).encode()
index = json.dumps({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
    "digest": blob(manifest), "size": len(manifest),
    "annotations": {"io.containerd.image.name": "localhost/cell-test/busybox:latest", "org.opencontainers.image.ref.name": "latest"}}]}).encode()
with tarfile.open(out, "w") as t:
    def add(name, b):
        ti = tarfile.TarInfo(name); ti.size = len(b); ti.mode = 0o644; t.addfile(ti, io.BytesIO(b))
    add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
    add("index.json", index)
    for b in (layer, config, manifest):
        add("blobs/sha256/" + hashlib.sha256(b).hexdigest(), b)
