/* An OCI runtime spec's seccomp profile (linux.seccomp of config.json), compiled with
 * libseccomp into the classic BPF program the runtime installs.
 *
 * The profile comes from a bundle: hostile input, checked field by field, errors naming the
 * field ("linux.seccomp.syscalls[3].args[0].op: unknown op 'SCMP_CMP_FOO'"). Semantics
 * follow the other runtimes an engine may have used before (so a profile means here what
 * it meant there): a syscall name this libseccomp does not know is left out and counted,
 * a rule whose action is the default is dropped, and a rule whose conditions compare one
 * argument more than once becomes one rule per condition (libseccomp allows one
 * comparison per argument in a rule). SCMP_ACT_NOTIFY (an agent at listenerPath) is
 * refused: cell-oci runs no such agent. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cell/seccomp.h"
#include "seccomp_bpf.h"

#define OCI_SC_SYSCALLS_MAX 4096 /* rules of a profile (Docker's default has under 100) */
#define OCI_SC_NAMES_MAX    1024 /* names of one rule */

struct oci_sc {
	scmp_filter_ctx sc;
	uint32_t default_action;
	unsigned default_errno;
	struct cell_seccomp_oci_report *rep;
	struct cell_error *err;
	char at[160]; /* the field being read */
};

static int bad(struct oci_sc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(struct oci_sc *c, const char *fmt, ...)
{
	char what[CELL_ERROR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return cell_err_msg(c->err, EINVAL, "linux.seccomp%s: %s", c->at, what);
}

static void at(struct oci_sc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void at(struct oci_sc *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (vsnprintf(c->at, sizeof(c->at), fmt, ap) >= (int)sizeof(c->at))
		c->at[sizeof(c->at) - 1] = '\0';
	va_end(ap);
}

/* errnoRet (when given) or the fallback; 0 < errno < 4096. */
static int errno_of(struct oci_sc *c, json_t *obj, const char *key, unsigned fallback,
		    unsigned *out)
{
	json_t *v = json_object_get(obj, key);
	if (!v || json_is_null(v)) {
		*out = fallback;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4095)
		return bad(c, "%s must be an errno (0 to 4095)", key);
	*out = (unsigned)json_integer_value(v);
	return 0;
}

static int action_of(struct oci_sc *c, const char *name, unsigned errnum, uint32_t *out)
{
	static const struct {
		const char *name;
		uint32_t action;
	} plain[] = {
	    {"SCMP_ACT_ALLOW", SCMP_ACT_ALLOW},
	    {"SCMP_ACT_KILL", SCMP_ACT_KILL_THREAD},
	    {"SCMP_ACT_KILL_THREAD", SCMP_ACT_KILL_THREAD},
	    {"SCMP_ACT_KILL_PROCESS", SCMP_ACT_KILL_PROCESS},
	    {"SCMP_ACT_TRAP", SCMP_ACT_TRAP},
	    {"SCMP_ACT_LOG", SCMP_ACT_LOG},
	};
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
		if (!strcmp(name, plain[i].name)) {
			*out = plain[i].action;
			return 0;
		}
	if (!strcmp(name, "SCMP_ACT_ERRNO")) {
		*out = SCMP_ACT_ERRNO(errnum);
		return 0;
	}
	if (!strcmp(name, "SCMP_ACT_TRACE")) {
		*out = SCMP_ACT_TRACE(errnum);
		return 0;
	}
	if (!strcmp(name, "SCMP_ACT_NOTIFY"))
		return bad(c, "SCMP_ACT_NOTIFY needs a seccomp agent, which cell-oci does not run");
	return bad(c, "unknown action '%.40s'", name);
}

static int add_architectures(struct oci_sc *c, json_t *prof)
{
	json_t *arr = json_object_get(prof, "architectures");
	if (!arr || json_is_null(arr))
		return 0;
	at(c, ".architectures");
	if (!json_is_array(arr) || json_array_size(arr) > 32)
		return bad(c, "must be an array of at most 32 names");
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const char *name = json_string_value(json_array_get(arr, i));
		at(c, ".architectures[%zu]", i);
		if (!name || strncmp(name, "SCMP_ARCH_", 10))
			return bad(c, "must be a name SCMP_ARCH_*");
		char lower[32];
		size_t n = 0;
		for (const char *p = name + 10; *p && n + 1 < sizeof(lower); p++)
			lower[n++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
		lower[n] = '\0';
		uint32_t arch = seccomp_arch_resolve_name(lower);
		if (!arch)
			return bad(c, "unknown architecture '%.40s'", name);
		int r = seccomp_arch_add(c->sc, arch);
		if (r < 0 && r != -EEXIST)
			return cell_err(c->err, -r, "linux.seccomp%s: adding %s", c->at, name);
	}
	return 0;
}

static int check_flags(struct oci_sc *c, json_t *prof)
{
	static const char *const known[] = {"SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_LOG",
					    "SECCOMP_FILTER_FLAG_SPEC_ALLOW",
					    "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"};
	json_t *arr = json_object_get(prof, "flags");
	if (!arr || json_is_null(arr))
		return 0;
	at(c, ".flags");
	if (!json_is_array(arr) || json_array_size(arr) > 8)
		return bad(c, "must be an array of at most 8 names");
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const char *name = json_string_value(json_array_get(arr, i));
		size_t k = 0;
		while (name && k < sizeof(known) / sizeof(known[0]) && strcmp(name, known[k]))
			k++;
		at(c, ".flags[%zu]", i);
		if (!name || k == sizeof(known) / sizeof(known[0]))
			return bad(c, "unknown flag");
		/* TSYNC: the container's init is single-threaded when the filter goes on; the
		 * others change logging and speculation, which the filter's action decides. */
		if (c->rep)
			c->rep->ignored_flags++;
	}
	return 0;
}

static const struct {
	const char *name;
	enum scmp_compare op;
} ops[] = {
    {"SCMP_CMP_NE", SCMP_CMP_NE},
    {"SCMP_CMP_LT", SCMP_CMP_LT},
    {"SCMP_CMP_LE", SCMP_CMP_LE},
    {"SCMP_CMP_EQ", SCMP_CMP_EQ},
    {"SCMP_CMP_GE", SCMP_CMP_GE},
    {"SCMP_CMP_GT", SCMP_CMP_GT},
    {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ},
};

static int read_u64(json_t *v, uint64_t *out)
{
	if (!v || json_is_null(v)) {
		*out = 0;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* A rule's args as libseccomp comparisons; *same_arg when two compare one argument. */
static int read_args(struct oci_sc *c, size_t rule, json_t *args, struct scmp_arg_cmp *cmp,
		     size_t *n, bool *same_arg)
{
	*n = 0;
	*same_arg = false;
	if (!args || json_is_null(args))
		return 0;
	at(c, ".syscalls[%zu].args", rule);
	if (!json_is_array(args) || json_array_size(args) > 6)
		return bad(c, "must be an array of at most 6 conditions");
	unsigned seen = 0;
	for (size_t i = 0; i < json_array_size(args); i++) {
		json_t *a = json_array_get(args, i);
		at(c, ".syscalls[%zu].args[%zu]", rule, i);
		json_t *index = json_object_get(a, "index");
		const char *op = json_string_value(json_object_get(a, "op"));
		uint64_t value, two;
		if (!json_is_object(a) || !json_is_integer(index) ||
		    json_integer_value(index) < 0 || json_integer_value(index) > 5)
			return bad(c, "needs an index from 0 to 5");
		if (read_u64(json_object_get(a, "value"), &value) < 0 ||
		    read_u64(json_object_get(a, "valueTwo"), &two) < 0)
			return bad(c, "value and valueTwo must be unsigned integers");
		size_t k = 0;
		while (op && k < sizeof(ops) / sizeof(ops[0]) && strcmp(op, ops[k].name))
			k++;
		if (!op || k == sizeof(ops) / sizeof(ops[0]))
			return bad(c, "unknown op '%.40s'", op ? op : "(none)");
		unsigned arg = (unsigned)json_integer_value(index);
		*same_arg = *same_arg || (seen & (1u << arg));
		seen |= 1u << arg;
		cmp[(*n)++] = (struct scmp_arg_cmp){
		    .arg = arg, .op = ops[k].op, .datum_a = value, .datum_b = two};
	}
	return 0;
}

static int add_one(struct oci_sc *c, uint32_t action, int nr, const struct scmp_arg_cmp *cmp,
		   size_t n, const char *name)
{
	int r = seccomp_rule_add_array(c->sc, action, nr, (unsigned)n, cmp);
	return r < 0 ? cell_err(c->err, -r, "linux.seccomp%s: libseccomp refused %s", c->at, name)
		     : 0;
}

static int add_rule(struct oci_sc *c, size_t i, json_t *rule)
{
	at(c, ".syscalls[%zu]", i);
	if (!json_is_object(rule))
		return bad(c, "must be an object");
	json_t *names = json_object_get(rule, "names");
	const char *act = json_string_value(json_object_get(rule, "action"));
	if (!json_is_array(names) || json_array_size(names) > OCI_SC_NAMES_MAX)
		return bad(c, "names must be an array of at most %d names", OCI_SC_NAMES_MAX);
	if (!act)
		return bad(c, "action must be a string");
	unsigned errnum;
	uint32_t action;
	int r = errno_of(c, rule, "errnoRet", c->default_errno, &errnum);
	if (r == 0)
		r = action_of(c, act, errnum, &action);
	struct scmp_arg_cmp cmp[6];
	size_t n = 0;
	bool same_arg = false;
	if (r == 0)
		r = read_args(c, i, json_object_get(rule, "args"), cmp, &n, &same_arg);
	if (r < 0 || action == c->default_action)
		return r;
	for (size_t k = 0; k < json_array_size(names); k++) {
		const char *name = json_string_value(json_array_get(names, k));
		at(c, ".syscalls[%zu].names[%zu]", i, k);
		if (!name || !name[0] || strlen(name) > 64)
			return bad(c, "must be a syscall name");
		int nr = seccomp_syscall_resolve_name(name);
		if (nr == __NR_SCMP_ERROR) {
			if (c->rep && !c->rep->unknown_syscalls++)
				snprintf(c->rep->first_unknown, sizeof(c->rep->first_unknown), "%s",
					 name);
			continue;
		}
		if (!same_arg)
			r = add_one(c, action, nr, cmp, n, name);
		for (size_t a = 0; same_arg && r == 0 && a < n; a++)
			r = add_one(c, action, nr, &cmp[a], 1, name);
		if (r < 0)
			return r;
	}
	return 0;
}

static int add_rules(struct oci_sc *c, json_t *prof)
{
	json_t *arr = json_object_get(prof, "syscalls");
	if (!arr || json_is_null(arr))
		return 0;
	at(c, ".syscalls");
	if (!json_is_array(arr) || json_array_size(arr) > OCI_SC_SYSCALLS_MAX)
		return bad(c, "must be an array of at most %d rules", OCI_SC_SYSCALLS_MAX);
	for (size_t i = 0; i < json_array_size(arr); i++) {
		int r = add_rule(c, i, json_array_get(arr, i));
		if (r < 0)
			return r;
	}
	return 0;
}

static int read_default(struct oci_sc *c, json_t *prof)
{
	at(c, ".defaultAction");
	const char *def = json_string_value(json_object_get(prof, "defaultAction"));
	if (!def)
		return bad(c, "must be a string");
	int r = errno_of(c, prof, "defaultErrnoRet", EPERM, &c->default_errno);
	return r < 0 ? r : action_of(c, def, c->default_errno, &c->default_action);
}

int cell_seccomp_compile_oci(const json_t *profile, struct cell_seccomp_prog *out,
			     struct cell_seccomp_oci_report *rep, struct cell_error *err)
{
	json_t *prof = (json_t *)profile;
	struct oci_sc c = {.rep = rep, .err = err};
	memset(out, 0, sizeof(*out));
	if (rep)
		memset(rep, 0, sizeof(*rep));
	if (!json_is_object(prof))
		return cell_err_msg(err, EINVAL, "linux.seccomp: must be an object");
	const char *listener = json_string_value(json_object_get(prof, "listenerPath"));
	if (listener && listener[0])
		return cell_err_msg(err, EINVAL,
				    "linux.seccomp.listenerPath: a seccomp agent is not supported");
	int r = read_default(&c, prof);
	if (r < 0)
		return r;
	c.sc = seccomp_init(c.default_action);
	if (!c.sc)
		return cell_err(err, ENOMEM, "linux.seccomp: seccomp_init");
	r = seccomp_attr_set(c.sc, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (r < 0)
		r = cell_err(err, -r, "linux.seccomp: filter attributes");
	if (r == 0)
		r = add_architectures(&c, prof);
	if (r == 0)
		r = check_flags(&c, prof);
	if (r == 0)
		r = add_rules(&c, prof);
	if (r == 0)
		r = cell_seccomp_export(c.sc, "linux.seccomp", out, err);
	seccomp_release(c.sc);
	return r;
}
