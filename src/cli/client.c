/* HTTP client of the cell CLI: libcurl over celld's Unix socket, JSON via jansson, and the
 * server-sent-event stream of POST /command.
 *
 * One curl handle is kept for the life of the process so create → exec → delete reuse one
 * connection to celld. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/fsutil.h"
#include "client.h"
#include "error.h"
#include "global.h"
#include "signals.h"

#define JSON_BODY_MAX  (64u << 20) /* largest JSON answer accepted (a long `ls`) */
#define ERROR_BODY_MAX (64u << 10) /* largest error body kept for the message */
#define SSE_EVENT_MAX  (16u << 20) /* one 64 KiB chunk, \u-escaped, is well below this */

static CURL *handle;
static struct curl_slist *json_headers;
static char curl_errbuf[CURL_ERROR_SIZE];
/* While true, a pending SIGINT/SIGTERM aborts the transfer (the progress callback). Off
 * during create and delete: aborting a create half-way would leave a sandbox the CLI
 * never learnt the id of. */
static bool transfer_abortable;
bool cli_unreachable;

void cli_buf_free(struct cli_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

static int buf_append(struct cli_buf *b, const void *data, size_t len, size_t max)
{
	if (len > max || b->len > max - len)
		return -EMSGSIZE;
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + len + 1)
			cap *= 2;
		char *p = realloc(b->data, cap);
		if (!p)
			return -ENOMEM;
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

void cli_client_cleanup(void)
{
	if (handle) {
		curl_easy_cleanup(handle);
		handle = NULL;
		curl_slist_free_all(json_headers);
		json_headers = NULL;
		curl_global_cleanup();
	}
}

char *cli_urlencode(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(3 * n + 1);
	if (!out)
		return NULL;
	char *o = out;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char c = *p;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
			*o++ = (char)c;
		} else {
			*o++ = '%';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 15];
		}
	}
	*o = '\0';
	return out;
}

static int progress_cb(void *data, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	(void)data, (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	return transfer_abortable && cli_signals_caught ? 1 : 0;
}

/* Prepare the shared handle for one request to `path` (URL path + query). */
static CURL *client_begin(const char *path, struct cell_error *err)
{
	if (strlen(cli.socket) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return cell_err(err, ENAMETOOLONG, "celld socket path %s", cli.socket), NULL;
	if (!handle) {
		/* Plain HTTP over a Unix socket only: skipping the TLS library's initialisation
		 * saves about a millisecond on every `cell` invocation. */
		if (curl_global_init(CURL_GLOBAL_NOTHING) != CURLE_OK)
			return cell_err(err, 0, "initialising libcurl failed"), NULL;
		handle = curl_easy_init();
		if (!handle)
			return cell_err(err, ENOMEM, "initialising libcurl"), NULL;
		json_headers = curl_slist_append(NULL, "Content-Type: application/json");
		/* A 1 s wait for "100 Continue" is pure latency on a local socket. */
		json_headers = curl_slist_append(json_headers, "Expect:");
		if (!json_headers)
			return cell_err(err, ENOMEM, "initialising libcurl"), NULL;
	} else {
		curl_easy_reset(handle); /* keeps the open connection */
	}
	_cleanup_free_ char *url = NULL;
	if (asprintf(&url, "http://localhost%s", path) < 0)
		return cell_err(err, ENOMEM, "building URL"), NULL;
	curl_errbuf[0] = '\0';
	curl_easy_setopt(handle, CURLOPT_UNIX_SOCKET_PATH, cli.socket);
	curl_easy_setopt(handle, CURLOPT_URL, url);
	curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
	/* A celld whose accept queue is full must not hang the CLI forever. */
	curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, curl_errbuf);
	curl_easy_setopt(handle, CURLOPT_USERAGENT, "cell-cli");
	curl_easy_setopt(handle, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, progress_cb);
	curl_easy_setopt(handle, CURLOPT_HTTPHEADER, json_headers);
	return handle;
}

static int transport_error(CURLcode rc, const char *what, struct cell_error *err)
{
	if (rc == CURLE_COULDNT_CONNECT) {
		long os_errno = 0;
		curl_easy_getinfo(handle, CURLINFO_OS_ERRNO, &os_errno);
		int e = os_errno > 0 ? (int)os_errno : ECONNREFUSED;
		cli_unreachable = true;
		const char *hint = e == EACCES ? " (run as root or as a member of group 'cell')"
					       : " (is celld running?)";
		cell_err(err, 0, "cannot reach celld at %s: %s%s", cli.socket, strerror(e), hint);
		err->code = e;
		return -e;
	}
	if (rc == CURLE_ABORTED_BY_CALLBACK)
		return cli_error_set(err, EINTR, "%s: interrupted", what);
	if (rc == CURLE_GOT_NOTHING)
		return cli_error_set(err, ECONNRESET,
				     "%s: celld closed the connection without answering", what);
	return cell_err(err, 0, "%s: request to celld at %s failed: %s", what, cli.socket,
			curl_errbuf[0] ? curl_errbuf : curl_easy_strerror(rc));
}

static int status_errno(long status)
{
	switch (status) {
	case 400:
		return EINVAL;
	case 401:
	case 403:
		return EACCES;
	case 404:
		return ENOENT;
	case 409:
		return EEXIST;
	case 413:
		return EFBIG;
	case 503:
		return EAGAIN;
	default:
		return EIO;
	}
}

/* Turn a non-2xx answer into a message: the server's {"code","message"} when present. */
static int http_error(long status, const struct cli_buf *body, const char *what, char *code,
		      size_t code_size, struct cell_error *err)
{
	int e = status_errno(status);
	json_t *j = body->len ? json_loadb(body->data, body->len, 0, NULL) : NULL;
	const char *c = j ? json_string_value(json_object_get(j, "code")) : NULL;
	const char *m = j ? json_string_value(json_object_get(j, "message")) : NULL;
	if (code && code_size)
		snprintf(code, code_size, "%s", c ? c : "");
	if (m)
		cell_err(err, 0, "%s: %s (%s)", what, m, c ? c : "error");
	else if (body->len)
		cell_err(err, 0, "%s: celld answered HTTP %ld: %.200s", what, status, body->data);
	else
		cell_err(err, 0, "%s: celld answered HTTP %ld", what, status);
	err->code = e;
	json_decref(j);
	return -e;
}

static size_t collect_cb(char *ptr, size_t size, size_t nmemb, void *data)
{
	struct cli_buf *b = data;
	size_t n = size * nmemb;
	return buf_append(b, ptr, n, JSON_BODY_MAX) < 0 ? 0 : n;
}

int cli_api_code(const char *method, const char *path, json_t *body, const char *what, json_t **out,
		 long *status, char *code, size_t code_size, struct cell_error *err)
{
	if (out)
		*out = NULL;
	if (status)
		*status = 0;
	if (code && code_size)
		code[0] = '\0';
	CURL *h = client_begin(path, err);
	if (!h)
		return -err->code;
	_cleanup_free_ char *text = NULL;
	if (body) {
		text = json_dumps(body, JSON_COMPACT);
		if (!text)
			return cell_err(err, ENOMEM, "%s: encoding the request", what);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(text));
	} else if (!strcmp(method, "POST")) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
	}
	if (strcmp(method, "GET") && strcmp(method, "POST"))
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	struct cli_buf resp = {0};
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);

	CURLcode rc = curl_easy_perform(h);
	long st = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
	if (status)
		*status = st;
	int r = 0;
	if (rc == CURLE_WRITE_ERROR)
		r = cli_error_set(err, EMSGSIZE, "%s: answer larger than %u bytes", what,
				  JSON_BODY_MAX);
	else if (rc != CURLE_OK)
		r = transport_error(rc, what, err);
	else if (st < 200 || st > 299)
		r = http_error(st, &resp, what, code, code_size, err);
	else if (out && resp.len) {
		json_error_t jerr;
		*out = json_loadb(resp.data, resp.len, 0, &jerr);
		if (!*out)
			r = cli_error_set(err, EPROTO, "%s: celld sent invalid JSON: %s", what,
					  jerr.text);
	}
	cli_buf_free(&resp);
	return r;
}

int cli_api(const char *method, const char *path, json_t *body, const char *what, json_t **out,
	    long *status, struct cell_error *err)
{
	return cli_api_code(method, path, body, what, out, status, NULL, 0, err);
}

/* ---- the command stream ---- */

struct sse_state {
	struct cli_buf buf;	/* bytes not yet split into events */
	size_t scanned;		/* buf[0..scanned) holds no "\n\n" */
	struct cli_buf errbody; /* the body of a non-200 answer */
	long status;
	char cmd_id[129];
	bool done;
	int exit_code;
	bool output_broken; /* stdout/stderr is a closed pipe */
	int proto_error;    /* -errno of a malformed stream */
	struct cell_error *err;
};

static int sse_output(struct sse_state *st, json_t *ev, int fd)
{
	json_t *jt = json_object_get(ev, "text");
	const char *text = json_string_value(jt);
	if (!text)
		return 0;
	size_t len = json_string_length(jt);
	const char *enc = json_string_value(json_object_get(ev, "encoding"));
	_cleanup_free_ uint8_t *raw = NULL;
	if (enc && !strcmp(enc, "base64")) {
		size_t rlen = 0;
		if (cell_base64_decode(text, len, &raw, &rlen) < 0)
			return st->proto_error = cli_error_set(
				   st->err, EPROTO, "celld sent an output event with bad base64");
		text = (const char *)raw;
		len = rlen;
	} else if (enc) {
		return st->proto_error =
			   cli_error_set(st->err, EPROTO, "celld sent unknown encoding '%s'", enc);
	}
	int r = cell_write_all(fd, text, len);
	if (r == -EPIPE) {
		st->output_broken = true;
		return r;
	}
	if (r < 0)
		return st->proto_error = cell_err(st->err, -r, "writing the command's %s",
						  fd == 1 ? "stdout" : "stderr");
	return 0;
}

static int parse_exit_value(const char *s)
{
	char *end = NULL;
	errno = 0;
	long v = s ? strtol(s, &end, 10) : -1;
	if (!s || errno || end == s || *end || v < 0 || v > 255)
		return -1;
	return (int)v;
}

static void sse_error_event(struct sse_state *st, json_t *ev)
{
	json_t *e = json_object_get(ev, "error");
	const char *ename = json_string_value(json_object_get(e, "ename"));
	const char *evalue = json_string_value(json_object_get(e, "evalue"));
	json_t *tb = json_object_get(e, "traceback");
	int code = parse_exit_value(evalue);
	bool exec_error = ename && !strcmp(ename, "CommandExecError");
	/* A plain non-zero exit is the command's own business; a timeout, a signal or a
	 * failure to start deserves one line on stderr naming what happened. */
	bool tell = !exec_error || code < 0 || code == CLI_EXIT_TIMEOUT || code > 128;
	if (tell) {
		size_t i;
		json_t *line;
		json_array_foreach(tb, i, line)
		{
			if (json_is_string(line))
				cli_error("%s", json_string_value(line));
		}
		if (!json_array_size(tb))
			cli_error("command failed: %s: %s", ename ? ename : "error",
				  evalue ? evalue : "?");
	}
	st->exit_code = code >= 0 ? code : CLI_EXIT_RUN_FAIL;
	st->done = true;
}

static int sse_event(struct sse_state *st, const char *text, size_t len)
{
	json_error_t jerr;
	/* JSON_ALLOW_NUL: command output may contain NUL bytes ("\u0000" is valid JSON). */
	json_t *ev = json_loadb(text, len, JSON_ALLOW_NUL, &jerr);
	if (!ev || !json_is_object(ev)) {
		json_decref(ev);
		return st->proto_error = cli_error_set(
			   st->err, EPROTO, "celld sent a malformed event: %s", jerr.text);
	}
	const char *type = json_string_value(json_object_get(ev, "type"));
	int r = 0;
	if (!type) {
		r = 0;
	} else if (!strcmp(type, "stdout")) {
		r = sse_output(st, ev, STDOUT_FILENO);
	} else if (!strcmp(type, "stderr")) {
		r = sse_output(st, ev, STDERR_FILENO);
	} else if (!strcmp(type, "init")) {
		const char *id = json_string_value(json_object_get(ev, "text"));
		if (id)
			snprintf(st->cmd_id, sizeof(st->cmd_id), "%s", id);
	} else if (!strcmp(type, "execution_complete")) {
		st->exit_code = 0;
		st->done = true;
	} else if (!strcmp(type, "error")) {
		sse_error_event(st, ev);
	} /* ping and event types of later versions are ignored */
	json_decref(ev);
	return r;
}

/* One event block (the text between blank lines): either bare JSON lines, or SSE
 * "data:" fields, which are joined with "\n". Comments (":") and other fields are skipped. */
static int sse_block(struct sse_state *st, char *block, size_t len)
{
	struct cli_buf data = {0};
	int r = 0;
	char *end = block + len;
	for (char *line = block; line < end && r == 0;) {
		char *nl = memchr(line, '\n', (size_t)(end - line));
		char *le = nl ? nl : end;
		size_t ll = (size_t)(le - line);
		if (ll && line[ll - 1] == '\r')
			ll--;
		if (ll && line[0] == '{') {
			r = sse_event(st, line, ll);
		} else if (ll >= 5 && !memcmp(line, "data:", 5)) {
			const char *v = line + 5;
			size_t vl = ll - 5;
			if (vl && *v == ' ')
				v++, vl--;
			if (data.len)
				r = buf_append(&data, "\n", 1, SSE_EVENT_MAX);
			if (r == 0)
				r = buf_append(&data, v, vl, SSE_EVENT_MAX);
			if (r < 0)
				r = st->proto_error = cell_err(st->err, -r, "reading an event");
		}
		line = le + 1;
	}
	if (r == 0 && data.len)
		r = sse_event(st, data.data, data.len);
	cli_buf_free(&data);
	return r;
}

/* Handle every complete event in the buffer, then move the rest to its front once (a
 * chunk holding thousands of small events costs one memmove, not thousands). */
static int sse_drain(struct sse_state *st, bool final)
{
	char *start = st->buf.data;
	size_t pos = 0;
	int r = 0;
	while (r == 0 && !st->done) {
		size_t from = pos + (st->scanned > pos + 1 ? st->scanned - pos - 1 : 0);
		char *sep = st->buf.len - from >= 2
				? memmem(start + from, st->buf.len - from, "\n\n", 2)
				: NULL;
		if (!sep) {
			st->scanned = st->buf.len;
			if (final && st->buf.len > pos) {
				r = sse_block(st, start + pos, st->buf.len - pos);
				pos = st->buf.len;
			}
			break;
		}
		r = sse_block(st, start + pos, (size_t)(sep - (start + pos)));
		pos = (size_t)(sep - start) + 2;
	}
	if (pos) {
		memmove(start, start + pos, st->buf.len - pos);
		st->buf.len -= pos;
		st->scanned = st->scanned > pos ? st->scanned - pos : 0;
	}
	return r;
}

static size_t sse_cb(char *ptr, size_t size, size_t nmemb, void *data)
{
	struct sse_state *st = data;
	size_t n = size * nmemb;
	if (!st->status)
		curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &st->status);
	if (st->status != 200) {
		/* Keep the start of an error body; the rest is not needed for the message. */
		size_t room = ERROR_BODY_MAX - st->errbody.len;
		buf_append(&st->errbody, ptr, n < room ? n : room, ERROR_BODY_MAX);
		return n;
	}
	if (st->done) /* anything after the end event is ignored */
		return n;
	if (buf_append(&st->buf, ptr, n, SSE_EVENT_MAX) < 0) {
		st->proto_error = cli_error_set(
		    st->err, EMSGSIZE, "celld sent an event larger than %u bytes", SSE_EVENT_MAX);
		return 0;
	}
	return sse_drain(st, false) < 0 ? 0 : n;
}

static json_t *exec_body(const struct cli_exec_req *req)
{
	json_t *argv = json_array();
	json_t *body = json_object();
	if (!argv || !body)
		goto fail;
	for (char *const *a = req->argv; *a; a++) {
		json_t *s = json_string(*a);
		if (!s) {
			cli_error("argument '%s' is not valid UTF-8", *a);
			goto fail;
		}
		json_array_append_new(argv, s);
	}
	json_object_set_new(body, "argv", argv);
	argv = NULL;
	if (req->cwd && json_object_set_new(body, "cwd", json_string(req->cwd)) < 0) {
		cli_error("-w '%s': not valid UTF-8", req->cwd);
		goto fail;
	}
	if (req->envs && json_object_size(req->envs))
		json_object_set(body, "envs", req->envs);
	if (req->timeout_ms > 0)
		json_object_set_new(body, "timeout", json_integer(req->timeout_ms));
	return body;
fail:
	json_decref(argv);
	json_decref(body);
	return NULL;
}

/* Ask celld to stop the command (SIGTERM to its process group, then SIGKILL). */
static void interrupt_command(const char *id, const char *cmd_id)
{
	if (!cmd_id[0])
		return;
	_cleanup_free_ char *enc = cli_urlencode(cmd_id);
	_cleanup_free_ char *path = NULL;
	if (!enc ||
	    asprintf(&path, "/v1/sandboxes/%s" CLI_EXECD_PREFIX "/command?id=%s", id, enc) < 0)
		return;
	struct cell_error err = {0};
	if (cli_api("DELETE", path, NULL, "interrupting the command", NULL, NULL, &err) < 0 &&
	    err.code != ENOENT)
		cli_error("%s", err.msg);
}

int cli_exec_stream(const struct cli_exec_req *req, int *exit_code, struct cell_error *err)
{
	*exit_code = CLI_EXIT_RUN_FAIL;
	json_t *body = exec_body(req);
	if (!body)
		return cli_error_set(err, EINVAL, "building the command request");
	_cleanup_free_ char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	_cleanup_free_ char *path = NULL;
	if (!text || asprintf(&path, "/v1/sandboxes/%s" CLI_EXECD_PREFIX "/command", req->id) < 0)
		return cell_err(err, ENOMEM, "building the command request");
	CURL *h = client_begin(path, err);
	if (!h)
		return -err->code;
	struct sse_state st = {.err = err};
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(text));
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sse_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &st);
	/* Small receive buffer: output is handed on as soon as it arrives. */
	curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 64L << 10);

	transfer_abortable = true;
	CURLcode rc = curl_easy_perform(h);
	transfer_abortable = false;
	if (!st.status)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st.status);
	if (rc == CURLE_OK && st.status == 200 && !st.done && !st.proto_error)
		sse_drain(&st, true);

	int r = 0;
	if (st.output_broken || (rc == CURLE_ABORTED_BY_CALLBACK && cli_signals_caught)) {
		/* The caller went away (^C, kill, closed pipe): stop the command too. */
		int sig = st.output_broken ? SIGPIPE : cli_signals_caught;
		interrupt_command(req->id, st.cmd_id);
		*exit_code = 128 + sig;
	} else if (st.proto_error) {
		interrupt_command(req->id, st.cmd_id);
		r = st.proto_error;
	} else if (rc != CURLE_OK) {
		r = transport_error(rc, "running the command", err);
	} else if (st.status != 200) {
		r = http_error(st.status, &st.errbody, "running the command", NULL, 0, err);
	} else if (!st.done) {
		r = cli_error_set(err, ECONNRESET,
				  "celld ended the output stream before the command finished");
	} else {
		*exit_code = st.exit_code;
	}
	cli_buf_free(&st.buf);
	cli_buf_free(&st.errbody);
	return r;
}

/* ---- files ---- */

static size_t fd_read_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	int fd = *(int *)arg;
	for (;;) {
		ssize_t n = read(fd, buf, size * nitems);
		if (n >= 0)
			return (size_t)n;
		if (errno != EINTR)
			return CURL_READFUNC_ABORT;
	}
}

int cli_upload(const char *id, int fd, const char *filename, const char *dest, unsigned mode,
	       struct cell_error *err)
{
	_cleanup_free_ char *path = NULL;
	if (asprintf(&path, "/v1/sandboxes/%s" CLI_EXECD_PREFIX "/files/upload", id) < 0)
		return cell_err(err, ENOMEM, "building the upload request");
	/* FileInfo.mode is an integer whose decimal digits are the octal permission (0755 is
	 * sent as 755), as in the execd API. */
	unsigned m = mode & 07777;
	unsigned digits = (m >> 9 & 7) * 1000 + (m >> 6 & 7) * 100 + (m >> 3 & 7) * 10 + (m & 7);
	json_t *meta = json_pack("{s:s, s:i}", "path", dest, "mode", (int)digits);
	if (!meta)
		return cli_error_set(err, EINVAL, "destination path '%s' is not valid UTF-8", dest);
	_cleanup_free_ char *meta_text = json_dumps(meta, JSON_COMPACT);
	json_decref(meta);
	if (!meta_text)
		return cell_err(err, ENOMEM, "building the upload request");

	CURL *h = client_begin(path, err);
	if (!h)
		return -err->code;
	curl_mime *mime = curl_mime_init(h);
	curl_mimepart *part = curl_mime_addpart(mime);
	curl_mime_name(part, "metadata");
	curl_mime_filename(part, "metadata");
	curl_mime_type(part, "application/json");
	curl_mime_data(part, meta_text, CURL_ZERO_TERMINATED);
	part = curl_mime_addpart(mime);
	curl_mime_name(part, "file");
	curl_mime_filename(part, filename);
	curl_mime_type(part, "application/octet-stream");
	struct stat stbuf;
	curl_off_t size = -1; /* unknown (a pipe): the body goes out chunked */
	if (fstat(fd, &stbuf) == 0 && S_ISREG(stbuf.st_mode))
		size = stbuf.st_size;
	int fdv = fd;
	curl_mime_data_cb(part, size, fd_read_cb, NULL, NULL, &fdv);
	curl_easy_setopt(h, CURLOPT_MIMEPOST, mime);
	/* The multipart body sets its own Content-Type; keep only "Expect:". */
	struct curl_slist *hdrs = curl_slist_append(NULL, "Expect:");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	struct cli_buf resp = {0};
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);

	transfer_abortable = true;
	CURLcode rc = curl_easy_perform(h);
	transfer_abortable = false;
	long st = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
	int r = 0;
	if (rc == CURLE_ABORTED_BY_CALLBACK && cli_signals_caught)
		r = cli_error_set(err, EINTR, "upload to %s:%s interrupted", id, dest);
	else if (rc != CURLE_OK)
		r = transport_error(rc, "upload", err);
	else if (st < 200 || st > 299)
		r = http_error(st, &resp, "upload", NULL, 0, err);
	cli_buf_free(&resp);
	curl_easy_setopt(h, CURLOPT_MIMEPOST, NULL);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_mime_free(mime);
	curl_slist_free_all(hdrs);
	return r;
}

struct download_state {
	int fd;
	long status;
	int write_errno;
	struct cli_buf errbody;
};

static size_t download_cb(char *ptr, size_t size, size_t nmemb, void *data)
{
	struct download_state *ds = data;
	size_t n = size * nmemb;
	if (!ds->status)
		curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &ds->status);
	if (ds->status < 200 || ds->status > 299) {
		size_t room = ERROR_BODY_MAX - ds->errbody.len;
		buf_append(&ds->errbody, ptr, n < room ? n : room, ERROR_BODY_MAX);
		return n;
	}
	int r = cell_write_all(ds->fd, ptr, n);
	if (r < 0) {
		ds->write_errno = -r;
		return 0;
	}
	return n;
}

int cli_download(const char *id, const char *path, int fd, struct cell_error *err)
{
	_cleanup_free_ char *enc = cli_urlencode(path);
	_cleanup_free_ char *url = NULL;
	if (!enc || asprintf(&url, "/v1/sandboxes/%s" CLI_EXECD_PREFIX "/files/download?path=%s",
			     id, enc) < 0)
		return cell_err(err, ENOMEM, "building the download request");
	CURL *h = client_begin(url, err);
	if (!h)
		return -err->code;
	struct download_state ds = {.fd = fd};
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, download_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &ds);
	transfer_abortable = true;
	CURLcode rc = curl_easy_perform(h);
	transfer_abortable = false;
	if (!ds.status)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &ds.status);
	int r = 0;
	if (ds.write_errno)
		r = cell_err(err, ds.write_errno, "writing the downloaded data");
	else if (rc == CURLE_ABORTED_BY_CALLBACK && cli_signals_caught)
		r = cli_error_set(err, EINTR, "download of %s:%s interrupted", id, path);
	else if (rc != CURLE_OK)
		r = transport_error(rc, "download", err);
	else if (ds.status < 200 || ds.status > 299)
		r = http_error(ds.status, &ds.errbody, "download", NULL, 0, err);
	cli_buf_free(&ds.errbody);
	return r;
}
