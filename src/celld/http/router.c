/* Routing: split a raw path into decoded segments, match it against a route table. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/id.h"
#include "router.h"
#include "url.h"

int router_split(const struct route_table *t, const char *raw, char *buf, size_t size, char **segs)
{
	if (raw[0] != '/' || strlen(raw) >= size)
		return -EINVAL;
	strcpy(buf, raw + 1);
	int n = 0;
	char *save = NULL;
	size_t len = strlen(buf);
	if (len && buf[len - 1] == '/')
		buf[len - 1] = '\0';
	if (!buf[0])
		return 0;
	for (char *p = buf;; p = NULL) {
		char *s = strtok_r(p, "/", &save);
		if (!s)
			break;
		/* Each segment decoded on its own: an encoded "/" stays inside its segment (and
		 * then fails id validation) instead of adding a path level. */
		if (n == ROUTER_SEGS_MAX || url_unescape(s, false) < 0)
			return -EINVAL;
		segs[n++] = s;
	}
	/* strtok_r folds "//": refuse those paths rather than guess. */
	if (strstr(raw, "//"))
		return -EINVAL;
	if (n && t->prefix && !strcmp(segs[0], t->prefix)) {
		memmove(segs, segs + 1, (n - 1) * sizeof(*segs));
		n--;
	}
	return n;
}

void router_match_free(struct router_match *m)
{
	for (unsigned k = 0; k < m->n_params; k++)
		free(m->params[k]);
	*m = (struct router_match){0};
}

/* Match segs against a pattern; captures are stored in m. 1 match, 0 no match. */
static int match_pattern(struct router_match *m, const char *pattern, char **segs, int n)
{
	char pat[256];
	snprintf(pat, sizeof(pat), "%s", pattern);
	char *save = NULL;
	int i = 0;
	unsigned np = 0;
	char *caps[ROUTER_PARAMS_MAX];
	for (char *p = pat;; p = NULL) {
		char *s = strtok_r(p, "/", &save);
		if (!s)
			break;
		if (!strcmp(s, "*")) {
			i = n;
			break;
		}
		if (i >= n)
			return 0;
		if (s[0] == '{') {
			if (np < ROUTER_PARAMS_MAX)
				caps[np++] = segs[i];
		} else if (strcmp(s, segs[i])) {
			return 0;
		}
		i++;
	}
	if (i != n)
		return 0;
	for (unsigned k = 0; k < np; k++) {
		m->params[k] = strdup(caps[k]);
		if (!m->params[k])
			return -ENOMEM;
		m->n_params = k + 1;
	}
	return 1;
}

/* Every {id}/{cmd} capture must be a valid id before it can reach a lookup or a path. */
static enum router_result check_ids(struct router_match *m)
{
	const char *pat = m->route->pattern;
	unsigned k = 0;
	for (const char *p = strchr(pat, '{'); p && k < m->n_params; p = strchr(p + 1, '{'), k++) {
		bool is_id = !strncmp(p, "{id}", 4), is_cmd = !strncmp(p, "{cmd}", 5);
		if ((is_id || is_cmd) && !cell_id_valid(m->params[k])) {
			m->bad_param = k;
			m->bad_name = is_id ? "id" : "cmd";
			return ROUTER_BAD_ID;
		}
	}
	return ROUTER_MATCH;
}

enum router_result router_route(const struct route_table *t, const char *method, const char *raw,
				struct router_match *m)
{
	char buf[ROUTER_PATH_MAX];
	char *segs[ROUTER_SEGS_MAX];
	*m = (struct router_match){0};
	int n = router_split(t, raw, buf, sizeof(buf), segs);
	if (n < 0)
		return ROUTER_BAD_PATH;
	bool path_known = false;
	for (size_t i = 0; i < t->n; i++) {
		bool any = !strcmp(t->routes[i].method, "*");
		if (any && path_known)
			continue;
		int r = match_pattern(m, t->routes[i].pattern, segs, n);
		if (r < 0) {
			router_match_free(m);
			return ROUTER_NOMEM;
		}
		if (!r)
			continue;
		if (!any && strcmp(t->routes[i].method, method)) {
			path_known = true;
			router_match_free(m);
			continue;
		}
		m->route = &t->routes[i];
		return check_ids(m);
	}
	return path_known ? ROUTER_NO_METHOD : ROUTER_NO_PATH;
}
