/* mirror: the package mirror of the network test lab (mirror.h). */
#include <arpa/inet.h>
#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/fsutil.h"
#include "cell/netlink.h"
#include "harness.h"
#include "mirror.h"

const char *const mirror_names[] = {"deb.debian.org", "pypi.org", "files.pythonhosted.org",
				    "registry.npmjs.org", NULL};

#define LOG_MAX	    256
#define LOG_LINE    320
#define REQ_MAX	    8192
#define IO_TIMEOUT  5000 /* ms a client may take to send its request or read the answer */
#define DRAIN_MS    500	 /* after the answer: what a client still sends, before close */
#define WHEEL	    "cell_hello-1.0-py3-none-any.whl"
#define NPM_TGZ	    "cell-hello-1.0.0.tgz"
#define DEB	    "cell-hello_1.0_all.deb"
#define DEB_POOL    "pool/main/c/cell-hello/"
#define WHEEL_DIR   "packages/ce/11/"
#define NPM_VERSION "1.0.0"

struct mirror {
	char dir[H_PATH]; /* the fixtures: <dir>/<host>/<path> */
	char arch[32];
	int root_fd;
	int listen_fd;
	int stop[2];
	pthread_t thread;
	pthread_mutex_t lock; /* log */
	char log[LOG_MAX][LOG_LINE];
	int n_log;
	int ready; /* 0 waiting, 1 up, -errno failed */
	pthread_mutex_t ready_lock;
	pthread_cond_t ready_cond;
	int inet_fd;
};

/* ---- small helpers ---- */

static void mkdirs(const char *path)
{
	struct cell_error err = {0};
	ck_assert_msg(cell_mkdir_p(path, 0755, &err) == 0, "mkdir -p %s: %s", path, err.msg);
}

/* Write data (len bytes) to dir/rel, making its parents. */
static void put_file(const char *dir, const char *rel, const void *data, size_t len, mode_t mode)
{
	char *path = h_fmt("%s/%s", dir, rel);
	char *slash = strrchr(path, '/');
	*slash = '\0';
	mkdirs(path);
	*slash = '/';
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	ck_assert_msg(fd >= 0, "create %s: %s", path, strerror(errno));
	ck_assert_msg(cell_write_all(fd, data, len) == 0, "write %s", path);
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
	free(path);
}

static void put_text(const char *dir, const char *rel, const char *text, mode_t mode)
{
	put_file(dir, rel, text, strlen(text), mode);
}

static char *slurp(const char *path, size_t *len)
{
	struct cell_error err = {0};
	char *out = NULL;
	ck_assert_msg(cell_read_file_at(AT_FDCWD, path, 64 << 20, &out, len, &err) == 0,
		      "read %s: %s", path, err.msg);
	return out;
}

static void digest(const char *md, const void *data, size_t len, unsigned char *out,
		   unsigned *out_len)
{
	ck_assert_msg(EVP_Digest(data, len, out, out_len, EVP_get_digestbyname(md), NULL) == 1,
		      "%s digest", md);
}

static void hex(const unsigned char *d, unsigned n, char *out)
{
	for (unsigned i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
	out[2 * n] = '\0';
}

/* The path of a host program (h_run executes argv[0] as a path). */
static const char *prog(const char *name)
{
	static char path[64];
	static const char *const dirs[] = {"/usr/bin", "/bin", "/usr/sbin", "/sbin"};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(dirs); i++) {
		snprintf(path, sizeof(path), "%s/%s", dirs[i], name);
		if (access(path, X_OK) == 0)
			return path;
	}
	ck_abort_msg("the mirror needs %s on the host (tools/install-deps)", name);
	return NULL;
}

/* Run argv (asserting exit 0). */
static void run_ok(char *const argv[])
{
	struct h_proc p;
	int st = h_run(argv, NULL, 60, &p);
	ck_assert_msg(st == 0, "%s: exit %d: %s%s", argv[0], st, p.out ? p.out : "",
		      p.err ? p.err : "");
	h_proc_free(&p);
}

/* ---- the Debian repository ---- */

static void host_arch(struct mirror *m)
{
	char *const argv[] = {(char *)prog("dpkg"), "--print-architecture", NULL};
	struct h_proc p;
	int st = h_run(argv, NULL, 30, &p);
	ck_assert_msg(st == 0 && p.out, "dpkg --print-architecture: exit %d", st);
	snprintf(m->arch, sizeof(m->arch), "%s", h_trim(p.out));
	h_proc_free(&p);
	for (const char *c = m->arch; *c; c++)
		ck_assert_msg(islower((unsigned char)*c) || isdigit((unsigned char)*c),
			      "dpkg architecture '%s'", m->arch);
}

static void build_deb(struct mirror *m)
{
	char *stage = h_fmt("%s/stage-deb", m->dir);
	put_text(stage, "DEBIAN/control",
		 "Package: cell-hello\n"
		 "Version: 1.0\n"
		 "Architecture: all\n"
		 "Maintainer: cell tests <tests@example.invalid>\n"
		 "Section: misc\n"
		 "Priority: optional\n"
		 "Description: greeting served by the test mirror\n",
		 0644);
	put_text(stage, "usr/bin/cell-hello", "#!/bin/sh\necho '" MIRROR_GREETING " (deb)'\n",
		 0755);
	char *out = h_fmt("%s/stage.deb", m->dir);
	char *const argv[] = {
	    (char *)prog("dpkg-deb"), "--root-owner-group", "-Zgzip", "--build", stage, out, NULL};
	run_ok(argv);

	size_t len;
	char *deb = slurp(out, &len);
	put_file(m->dir, "deb.debian.org/debian/" DEB_POOL DEB, deb, len, 0644);
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dn;
	char sha[2 * EVP_MAX_MD_SIZE + 1];
	digest("SHA256", deb, len, d, &dn);
	hex(d, dn, sha);
	free(deb);

	char *packages = h_fmt("Package: cell-hello\n"
			       "Version: 1.0\n"
			       "Architecture: all\n"
			       "Maintainer: cell tests <tests@example.invalid>\n"
			       "Installed-Size: 1\n"
			       "Section: misc\n"
			       "Priority: optional\n"
			       "Filename: " DEB_POOL DEB "\n"
			       "Size: %zu\n"
			       "SHA256: %s\n"
			       "Description: greeting served by the test mirror\n\n",
			       len, sha);
	char *index = h_fmt("main/binary-%s/Packages", m->arch);
	char *rel = h_fmt("deb.debian.org/debian/dists/bookworm/%s", index);
	put_text(m->dir, rel, packages, 0644);
	digest("SHA256", packages, strlen(packages), d, &dn);
	hex(d, dn, sha);

	/* Date: a minute ago (apt refuses a Release from the future). */
	char date[64];
	time_t now = time(NULL) - 60;
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S UTC", &tm);
	char *release = h_fmt("Origin: Debian\n"
			      "Label: Debian\n"
			      "Suite: stable\n"
			      "Codename: bookworm\n"
			      "Date: %s\n"
			      "Architectures: %s\n"
			      "Components: main\n"
			      "Description: the test mirror\n"
			      "SHA256:\n"
			      " %s %zu %s\n",
			      date, m->arch, sha, strlen(packages), index);
	put_text(m->dir, "deb.debian.org/debian/dists/bookworm/Release", release, 0644);
	free(release);
	free(rel);
	free(index);
	free(packages);
	free(out);
	free(stage);
}

/* ---- the wheel: a zip of stored members ---- */

static uint32_t crc32_of(const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
	}
	return ~c;
}

struct zbuf {
	unsigned char *p;
	size_t len, cap;
};

static void zput(struct zbuf *b, const void *data, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 256;
		b->p = realloc(b->p, b->cap);
		ck_assert_ptr_nonnull(b->p);
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

static void z16(struct zbuf *b, unsigned v)
{
	unsigned char x[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
	zput(b, x, 2);
}

static void z32(struct zbuf *b, uint32_t v)
{
	unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
			      (unsigned char)(v >> 24)};
	zput(b, x, 4);
}

struct zmember {
	const char *name;
	const char *data;
};

/* A zip (no compression, no data descriptors) of the members, n of them. */
static struct zbuf zip_stored(const struct zmember *mem, size_t n)
{
	struct zbuf z = {0}, cd = {0};
	const unsigned dos_time = 0, dos_date = (1 << 5) | 1 | ((2020 - 1980) << 9);
	for (size_t i = 0; i < n; i++) {
		size_t nl = strlen(mem[i].name), dl = strlen(mem[i].data);
		uint32_t crc = crc32_of((const unsigned char *)mem[i].data, dl);
		uint32_t off = (uint32_t)z.len;
		z32(&z, 0x04034b50);
		z16(&z, 20), z16(&z, 0), z16(&z, 0), z16(&z, dos_time), z16(&z, dos_date);
		z32(&z, crc), z32(&z, (uint32_t)dl), z32(&z, (uint32_t)dl);
		z16(&z, (unsigned)nl), z16(&z, 0);
		zput(&z, mem[i].name, nl);
		zput(&z, mem[i].data, dl);
		z32(&cd, 0x02014b50);
		z16(&cd, 0x0314), z16(&cd, 20), z16(&cd, 0), z16(&cd, 0);
		z16(&cd, dos_time), z16(&cd, dos_date);
		z32(&cd, crc), z32(&cd, (uint32_t)dl), z32(&cd, (uint32_t)dl);
		z16(&cd, (unsigned)nl), z16(&cd, 0), z16(&cd, 0), z16(&cd, 0), z16(&cd, 0);
		z32(&cd, 0100644u << 16);
		z32(&cd, off);
		zput(&cd, mem[i].name, nl);
	}
	uint32_t cd_off = (uint32_t)z.len;
	zput(&z, cd.p, cd.len);
	z32(&z, 0x06054b50);
	z16(&z, 0), z16(&z, 0), z16(&z, (unsigned)n), z16(&z, (unsigned)n);
	z32(&z, (uint32_t)cd.len), z32(&z, cd_off), z16(&z, 0);
	free(cd.p);
	return z;
}

/* RECORD's hash: sha256=<urlsafe base64, no padding>. */
static char *record_hash(const char *data)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dn;
	digest("SHA256", data, strlen(data), d, &dn);
	char *b = cell_base64_encode(d, dn);
	ck_assert_ptr_nonnull(b);
	for (char *c = b; *c; c++)
		*c = *c == '+' ? '-' : *c == '/' ? '_' : *c;
	char *eq = strchr(b, '=');
	if (eq)
		*eq = '\0';
	return b;
}

static void build_wheel(struct mirror *m)
{
	static const char init[] = "GREETING = '" MIRROR_GREETING " (pypi)'\nprint(GREETING)\n";
	static const char metadata[] = "Metadata-Version: 2.1\nName: cell-hello\nVersion: 1.0\n"
				       "Summary: greeting served by the test mirror\n";
	static const char wheel[] = "Wheel-Version: 1.0\nGenerator: cell-tests\n"
				    "Root-Is-Purelib: true\nTag: py3-none-any\n";
	struct zmember mem[] = {
	    {"cell_hello/__init__.py", init},
	    {"cell_hello-1.0.dist-info/METADATA", metadata},
	    {"cell_hello-1.0.dist-info/WHEEL", wheel},
	    {"cell_hello-1.0.dist-info/RECORD", NULL},
	};
	char *record = strdup("");
	for (size_t i = 0; i < 3; i++) {
		char *h = record_hash(mem[i].data);
		char *r =
		    h_fmt("%s%s,sha256=%s,%zu\n", record, mem[i].name, h, strlen(mem[i].data));
		free(record);
		free(h);
		record = r;
	}
	char *r = h_fmt("%scell_hello-1.0.dist-info/RECORD,,\n", record);
	free(record);
	mem[3].data = r;
	struct zbuf z = zip_stored(mem, CELL_ARRAY_SIZE(mem));
	free(r);
	put_file(m->dir, "files.pythonhosted.org/" WHEEL_DIR WHEEL, z.p, z.len, 0644);

	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dn;
	char sha[2 * EVP_MAX_MD_SIZE + 1];
	digest("SHA256", z.p, z.len, d, &dn);
	hex(d, dn, sha);
	free(z.p);
	char *page = h_fmt("<!DOCTYPE html>\n<html><body>\n"
			   "<a href=\"http://files.pythonhosted.org/" WHEEL_DIR WHEEL
			   "#sha256=%s\">" WHEEL "</a><br/>\n</body></html>\n",
			   sha);
	put_text(m->dir, "pypi.org/simple/cell-hello/index.html", page, 0644);
	put_text(m->dir, "pypi.org/simple/index.html",
		 "<!DOCTYPE html>\n<html><body>\n<a href=\"/simple/cell-hello/\">cell-hello</a>\n"
		 "</body></html>\n",
		 0644);
	free(page);
}

/* ---- the npm package ---- */

static void build_npm(struct mirror *m)
{
	char *stage = h_fmt("%s/stage-npm", m->dir);
	put_text(stage, "package/package.json",
		 "{\"name\": \"cell-hello\", \"version\": \"" NPM_VERSION "\", "
		 "\"main\": \"index.js\", \"license\": \"MIT\", "
		 "\"description\": \"greeting served by the test mirror\"}\n",
		 0644);
	put_text(stage, "package/index.js", "module.exports = '" MIRROR_GREETING " (npm)';\n",
		 0644);
	char *out = h_fmt("%s/stage.tgz", m->dir);
	char *const argv[] = {(char *)prog("tar"), "-czf", out,	  "--owner=0", "--group=0",
			      "--numeric-owner",   "-C",   stage, "package",   NULL};
	run_ok(argv);
	size_t len;
	char *tgz = slurp(out, &len);
	put_file(m->dir, "registry.npmjs.org/cell-hello/-/" NPM_TGZ, tgz, len, 0644);
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dn;
	char sha1[2 * EVP_MAX_MD_SIZE + 1];
	digest("SHA1", tgz, len, d, &dn);
	hex(d, dn, sha1);
	digest("SHA512", tgz, len, d, &dn);
	char *b64 = cell_base64_encode(d, dn);
	ck_assert_ptr_nonnull(b64);
	char *integrity = h_fmt("sha512-%s", b64);
	free(b64);
	free(tgz);

	json_t *version =
	    json_pack("{s:s,s:s,s:s,s:s,s:{s:s,s:s,s:s}}", "name", "cell-hello", "version",
		      NPM_VERSION, "main", "index.js", "license", "MIT", "dist", "tarball",
		      "http://registry.npmjs.org/cell-hello/-/" NPM_TGZ, "shasum", sha1,
		      "integrity", integrity);
	ck_assert_ptr_nonnull(version);
	json_t *doc = json_pack("{s:s,s:{s:s},s:{s:o}}", "name", "cell-hello", "dist-tags",
				"latest", NPM_VERSION, "versions", NPM_VERSION, version);
	ck_assert_ptr_nonnull(doc);
	char *text = json_dumps(doc, JSON_COMPACT);
	ck_assert_ptr_nonnull(text);
	put_text(m->dir, "registry.npmjs.org/cell-hello/index.json", text, 0644);
	free(text);
	json_decref(doc);
	free(integrity);
	free(out);
	free(stage);
}

/* ---- the server ---- */

static void log_req(struct mirror *m, const char *host, const char *path, int status)
{
	pthread_mutex_lock(&m->lock);
	if (m->n_log < LOG_MAX)
		snprintf(m->log[m->n_log++], LOG_LINE, "%.100s %.200s %d", host, path, status);
	pthread_mutex_unlock(&m->lock);
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for events on fd until deadline: true when they came. */
static bool wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - mono_ms();
		if (left <= 0)
			return false;
		struct pollfd p = {.fd = fd, .events = events};
		int r = poll(&p, 1, (int)left);
		if (r > 0)
			return true;
		if (r < 0 && errno != EINTR)
			return false;
	}
}

static bool send_all(int fd, const void *buf, size_t len, int64_t deadline)
{
	const char *p = buf;
	while (len) {
		if (!wait_fd(fd, POLLOUT, deadline))
			return false;
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/* A Host header's name: lower case, port dropped; false unless [a-z0-9.-]{1,100}. */
static bool clean_host(const char *in, char *out, size_t size)
{
	size_t n = 0;
	for (; in[n] && in[n] != ':' && in[n] != '\r' && in[n] != '\n'; n++) {
		char c = (char)tolower((unsigned char)in[n]);
		if (n + 1 >= size || n >= 100 ||
		    !(isalnum((unsigned char)c) || c == '.' || c == '-'))
			return false;
		out[n] = c;
	}
	out[n] = '\0';
	return n > 0 && out[0] != '.';
}

/* A request path: query and fragment dropped; false unless it starts with '/', has no "..",
 * and only [A-Za-z0-9._/+~-]. The leading '/' is dropped in out. */
static bool clean_path(const char *in, size_t len, char *out, size_t size)
{
	if (!len || in[0] != '/')
		return false;
	size_t n = 0;
	for (size_t i = 1; i < len && in[i] != '?' && in[i] != '#'; i++) {
		char c = in[i];
		if (n + 1 >= size || !(isalnum((unsigned char)c) || strchr("._/+~-", c)))
			return false;
		out[n++] = c;
	}
	out[n] = '\0';
	return !strstr(out, "..");
}

static const char *content_type(const char *name)
{
	const char *dot = strrchr(name, '.');
	if (dot && !strcmp(dot, ".html"))
		return "text/html";
	if (dot && !strcmp(dot, ".json"))
		return "application/json";
	return "application/octet-stream";
}

/* The file for host/path: an fd (and its name, for the type), or -1. */
static int open_fixture(struct mirror *m, const char *host, const char *path, char *name,
			size_t size)
{
	char *rel = h_fmt("%s/%s", host, path);
	size_t l = strlen(rel);
	while (l && rel[l - 1] == '/')
		rel[--l] = '\0';
	int fd = cell_open_in_root(m->root_fd, rel, O_RDONLY | O_CLOEXEC, 0, 1);
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		static const char *const idx[] = {"index.html", "index.json"};
		int dfd = fd;
		fd = -1;
		for (size_t i = 0; i < CELL_ARRAY_SIZE(idx) && fd < 0; i++) {
			fd = cell_open_in_root(dfd, idx[i], O_RDONLY | O_CLOEXEC, 0, 1);
			snprintf(name, size, "%s", idx[i]);
		}
		close(dfd);
	} else {
		snprintf(name, size, "%s", rel);
	}
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
	}
	free(rel);
	return fd < 0 ? -1 : fd;
}

static void serve(struct mirror *m, int c)
{
	int64_t deadline = mono_ms() + IO_TIMEOUT;
	char req[REQ_MAX + 1];
	size_t len = 0;
	while (len < REQ_MAX && wait_fd(c, POLLIN, deadline)) {
		ssize_t n = recv(c, req + len, REQ_MAX - len, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		req[len] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	req[len] = '\0';
	if (!strstr(req, "\r\n\r\n"))
		return;
	bool head = !strncmp(req, "HEAD ", 5);
	bool get = !strncmp(req, "GET ", 4);
	const char *target = req + (head ? 5 : 4);
	size_t tlen = strcspn(target, " \r\n");
	char host[128] = "", path[512] = "", name[600] = "";
	const char *h = strcasestr(req, "\r\nHost:");
	if (h) {
		h += 7;
		while (*h == ' ' || *h == '\t')
			h++;
	}
	int status = 400;
	int fd = -1;
	if ((get || head) && h && clean_host(h, host, sizeof(host)) &&
	    clean_path(target, tlen, path, sizeof(path))) {
		fd = open_fixture(m, host, path, name, sizeof(name));
		status = fd >= 0 ? 200 : 404;
	}
	char hdr[512];
	struct stat st = {0};
	if (fd >= 0)
		fstat(fd, &st);
	int hl = snprintf(hdr, sizeof(hdr),
			  "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %lld\r\n"
			  "Connection: close\r\n\r\n",
			  status,
			  status == 200	  ? "OK"
			  : status == 404 ? "Not Found"
					  : "Bad Request",
			  status == 200 ? content_type(name) : "text/plain",
			  status == 200 ? (long long)st.st_size : 0LL);
	char tpath[200];
	snprintf(tpath, sizeof(tpath), "%.*s", (int)(tlen < 199 ? tlen : 199), target);
	log_req(m, host[0] ? host : "-", tpath, status);
	bool ok = send_all(c, hdr, (size_t)hl, deadline);
	while (ok && fd >= 0 && !head) {
		char buf[16384];
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		ok = send_all(c, buf, (size_t)n, deadline);
	}
	if (fd >= 0)
		close(fd);
	/* Close gently: what the client still sends (pipelined requests) is read and dropped,
	 * so the close sends no reset that could destroy the answer in flight. */
	shutdown(c, SHUT_WR);
	int64_t drain = mono_ms() + DRAIN_MS;
	char sink[4096];
	while (wait_fd(c, POLLIN, drain) && recv(c, sink, sizeof(sink), MSG_DONTWAIT) > 0)
		;
}

static void set_ready(struct mirror *m, int r)
{
	pthread_mutex_lock(&m->ready_lock);
	m->ready = r < 0 ? r : 1;
	pthread_cond_broadcast(&m->ready_cond);
	pthread_mutex_unlock(&m->ready_lock);
}

static void *server_thread(void *p)
{
	struct mirror *m = p;
	/* This thread lives in the lab's internet: its socket is made there. */
	if (setns(m->inet_fd, CLONE_NEWNET) < 0) {
		set_ready(m, -errno);
		return NULL;
	}
	m->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (m->listen_fd < 0) {
		set_ready(m, -errno);
		return NULL;
	}
	int one = 1;
	setsockopt(m->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(80)};
	inet_pton(AF_INET, MIRROR_ADDR, &sa.sin_addr);
	if (bind(m->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(m->listen_fd, 64) < 0) {
		set_ready(m, -errno);
		return NULL;
	}
	set_ready(m, 0);
	for (;;) {
		struct pollfd pfd[2] = {{.fd = m->stop[0], .events = POLLIN},
					{.fd = m->listen_fd, .events = POLLIN}};
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[0].revents)
			break;
		int c = accept4(m->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c < 0)
			continue;
		serve(m, c);
		close(c);
	}
	return NULL;
}

/* ---- the mirror ---- */

struct mirror *mirror_new(struct netlab *lab)
{
	struct mirror *m = calloc(1, sizeof(*m));
	ck_assert_ptr_nonnull(m);
	m->listen_fd = m->root_fd = -1;
	m->stop[0] = m->stop[1] = -1;
	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->ready_lock, NULL);
	pthread_cond_init(&m->ready_cond, NULL);
	ck_assert_uint_lt(strlen(H.dir) + sizeof("/mirror-XXXXXX"), sizeof(m->dir));
	memcpy(m->dir, H.dir, strlen(H.dir));
	strcat(m->dir, "/mirror-XXXXXX");
	ck_assert_msg(mkdtemp(m->dir), "mkdtemp %s: %s", m->dir, strerror(errno));
	ck_assert_int_eq(chmod(m->dir, 0755), 0);
	host_arch(m);
	build_deb(m);
	build_wheel(m);
	build_npm(m);
	m->root_fd = open(m->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(m->root_fd, 0);

	/* The address, beside the lab's own on the internet's lo. */
	m->inet_fd = netlab_internet_fd(lab);
	struct cell_error err = {0};
	struct cell_nl nl = {0};
	struct in_addr a;
	ck_assert_int_eq(inet_pton(AF_INET, MIRROR_ADDR, &a), 1);
	ck_assert_msg(cell_nl_open(&nl, m->inet_fd, &err) >= 0, "netlink in internet: %s", err.msg);
	ck_assert_msg(cell_nl_addr_add4(&nl, "lo", a, 32, NULL, &err) >= 0,
		      "adding " MIRROR_ADDR ": %s", err.msg);
	cell_nl_close(&nl);

	ck_assert_int_eq(pipe2(m->stop, O_CLOEXEC), 0);
	ck_assert_int_eq(pthread_create(&m->thread, NULL, server_thread, m), 0);
	pthread_mutex_lock(&m->ready_lock);
	while (!m->ready)
		pthread_cond_wait(&m->ready_cond, &m->ready_lock);
	pthread_mutex_unlock(&m->ready_lock);
	ck_assert_msg(m->ready > 0, "mirror: listening on " MIRROR_ADDR ":80: %s",
		      strerror(-m->ready));
	for (size_t i = 0; mirror_names[i]; i++)
		netlab_dns_set(lab, mirror_names[i], MIRROR_ADDR);
	return m;
}

void mirror_free(struct mirror *m)
{
	if (!m)
		return;
	if (m->stop[1] >= 0) {
		ssize_t w = write(m->stop[1], "x", 1);
		(void)w; /* the pipe is empty: it cannot fail */
		pthread_join(m->thread, NULL);
		close(m->stop[0]);
		close(m->stop[1]);
	}
	if (m->listen_fd >= 0)
		close(m->listen_fd);
	if (m->root_fd >= 0)
		close(m->root_fd);
	char *slash = strrchr(m->dir, '/');
	*slash = '\0';
	int pfd = open(m->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct cell_error err = {0};
	ck_assert_msg(pfd >= 0 && cell_remove_tree_at(pfd, slash + 1, &err) == 0,
		      "removing the mirror's fixtures: %s", err.msg);
	close(pfd);
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->ready_lock);
	pthread_cond_destroy(&m->ready_cond);
	free(m);
}

const char *mirror_deb_arch(const struct mirror *m)
{
	return m->arch;
}

unsigned mirror_count(struct mirror *m, const char *host, const char *suffix, int status)
{
	unsigned n = 0;
	pthread_mutex_lock(&m->lock);
	for (int i = 0; i < m->n_log; i++) {
		char h[128], p[256];
		int st = 0;
		if (sscanf(m->log[i], "%127s %255s %d", h, p, &st) != 3 ||
		    (status >= 0 && st != status))
			continue;
		size_t pl = strlen(p), sl = suffix ? strlen(suffix) : 0;
		if ((!host || !strcmp(h, host)) &&
		    (!suffix || (pl >= sl && !strcmp(p + pl - sl, suffix))))
			n++;
	}
	pthread_mutex_unlock(&m->lock);
	return n;
}

char *mirror_log(struct mirror *m)
{
	pthread_mutex_lock(&m->lock);
	size_t cap = (size_t)m->n_log * LOG_LINE + 1, len = 0;
	char *out = malloc(cap);
	ck_assert_ptr_nonnull(out);
	out[0] = '\0';
	for (int i = 0; i < m->n_log; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s\n", m->log[i]);
	pthread_mutex_unlock(&m->lock);
	return out;
}
