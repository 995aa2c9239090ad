/* TEMPORARY, until the branch net-dns lands resolver.c: a resolver that serves nothing, so
 * that celld links. Delete this file when resolver.c exists. */
#include <arpa/inet.h>
#include <string.h>
#include "resolver.h"
int resolver_start(const struct sockaddr_in *u, resolver_answer_fn *f, void *c,
		   struct cell_error *e)
{
	(void)u;
	(void)f;
	(void)c;
	(void)e;
	return 0;
}
void resolver_stop(void)
{
}
int resolver_add(const char *k, const char *id, struct in_addr a, const struct resolver_rules *r,
		 bool p, struct cell_error *e)
{
	(void)k;
	(void)id;
	(void)a;
	(void)r;
	(void)p;
	(void)e;
	return 0;
}
int resolver_set_rules(const char *k, const struct resolver_rules *r, bool p, struct cell_error *e)
{
	(void)k;
	(void)r;
	(void)p;
	(void)e;
	return 0;
}
void resolver_remove(const char *k)
{
	(void)k;
}
int resolver_parse_upstream(const char *t, struct sockaddr_in *o, struct cell_error *e)
{
	(void)e;
	memset(o, 0, sizeof(*o));
	o->sin_family = AF_INET;
	o->sin_port = htons(53);
	inet_pton(AF_INET, t, &o->sin_addr);
	return 0;
}
int resolver_default_upstream(struct sockaddr_in *o, struct cell_error *e)
{
	return resolver_parse_upstream("127.0.0.1", o, e);
}
