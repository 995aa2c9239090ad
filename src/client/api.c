/* JSON requests of the client library: a non-2xx answer is an error. */
#include <errno.h>
#include <string.h>

#include "cell/cleanup.h"
#include "internal.h"

static int api_answer(struct cell_client *c, CURLcode rc, const struct cell_client_buf *resp,
		      const char *what, struct cell_client_answer *ans, struct cell_error *err)
{
	long st = cell_client_status(c);
	if (ans)
		ans->status = st;
	if (rc == CURLE_WRITE_ERROR)
		return cell_err_msg(err, EMSGSIZE, "%s: answer larger than %u bytes", what,
				    CELL_CLIENT_BODY_MAX);
	if (rc != CURLE_OK)
		return cell_client_transport_error(c, rc, what, err);
	if (st < 200 || st > 299)
		return cell_client_status_error(st, resp, what, ans ? ans->code : NULL,
						ans ? sizeof(ans->code) : 0, err);
	if (ans && resp->len) {
		json_error_t jerr;
		ans->json = json_loadb(resp->data, resp->len, 0, &jerr);
		if (!ans->json)
			return cell_err_msg(err, EPROTO, "%s: celld sent invalid JSON: %s", what,
					    jerr.text);
	}
	return 0;
}

int cell_client_api(struct cell_client *c, const char *method, const char *path, json_t *body,
		    const char *what, struct cell_client_answer *ans, struct cell_error *err)
{
	if (ans)
		*ans = (struct cell_client_answer){0};
	CURL *h = cell_client_begin(c, path, err);
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
	struct cell_client_buf resp = {0};
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cell_client_collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);
	CURLcode rc = cell_client_perform(c, false);
	int r = api_answer(c, rc, &resp, what, ans, err);
	cell_client_buf_free(&resp);
	return r;
}
