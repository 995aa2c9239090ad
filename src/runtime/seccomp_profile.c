/* seccomp profiles: strict parsing of policies/seccomp/<name>.json, compilation with libseccomp
 * into classic BPF, and the same decision evaluated in user space for notifications.
 *
 * Argument rules the kernel cannot see through: for every argument these profiles filter
 * (socket family, ioctl request, personality, clone flags) the kernel reads an int, so a
 * caller may put anything in the upper half of the register. A 64-bit comparison against a
 * 32-bit constant would then be bypassed (CVE-2019-10063: a TIOCSTI filter defeated with
 * high bits set). So "eq", "in" and "not_in" compare the low 32 bits; "masked_eq" and "has_any"
 * look only at the bits they name. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/sched.h>

#include <jansson.h>
#include <seccomp.h>

#include "cell/cleanup.h"
#include "cell/seccomp.h"
#include "seccomp_bpf.h"

#define MAX_VALUES	16   /* values of one not_in */
#define MAX_EXPANSION	2048 /* libseccomp rules one profile may expand to */
#define NEWER_LAST	511  /* newer-syscall rule covers numbers up to this one */
#define X32_SYSCALL_BIT 0x40000000u
#define LOW32		0xffffffffull
#define FIELD_MAX	96

enum op { OP_EQ, OP_IN, OP_MASKED_EQ, OP_HAS_ANY, OP_NOT_IN };

struct cond {
	unsigned index;
	enum op op;
	uint64_t mask, value;
	uint32_t values[MAX_VALUES];
	size_t n_values;
};

struct action {
	int errnum; /* positive */
	bool log;   /* answered through the listener when the sandbox logs */
};

struct rule {
	int *nrs; /* native numbers; names not on this architecture are left out */
	size_t n_nrs;
	struct action act;
	struct cond conds[6];
	size_t n_conds;
};

struct cell_seccomp_profile {
	char name[CELL_SECCOMP_NAME_MAX + 1];
	struct action foreign;
	struct action newer;
	bool has_newer;
	int max_known; /* highest native number libseccomp can name */
	struct rule *rules;
	size_t n_rules;
};

/* ---- names ---- */

struct named {
	const char *name;
	uint64_t value;
};

/* Symbolic constants a profile may use, so that a reader needs no hex. Values are the
 * kernel's ABI (include/uapi), the same on every architecture. */
static const struct named constants[] = {
    {"CLONE_NEWNS", 0x00020000},
    {"CLONE_NEWCGROUP", 0x02000000},
    {"CLONE_NEWUTS", 0x04000000},
    {"CLONE_NEWIPC", 0x08000000},
    {"CLONE_NEWUSER", 0x10000000},
    {"CLONE_NEWPID", 0x20000000},
    {"CLONE_NEWNET", 0x40000000},
    {"CLONE_NEWTIME", 0x00000080},
    {"AF_UNIX", 1},
    {"AF_LOCAL", 1},
    {"AF_INET", 2},
    {"AF_AX25", 3},
    {"AF_IPX", 4},
    {"AF_APPLETALK", 5},
    {"AF_NETROM", 6},
    {"AF_BRIDGE", 7},
    {"AF_ATMPVC", 8},
    {"AF_X25", 9},
    {"AF_INET6", 10},
    {"AF_ROSE", 11},
    {"AF_DECnet", 12},
    {"AF_NETBEUI", 13},
    {"AF_SECURITY", 14},
    {"AF_KEY", 15},
    {"AF_NETLINK", 16},
    {"AF_PACKET", 17},
    {"AF_ECONET", 19},
    {"AF_ATMSVC", 20},
    {"AF_RDS", 21},
    {"AF_SNA", 22},
    {"AF_IRDA", 23},
    {"AF_PPPOX", 24},
    {"AF_WANPIPE", 25},
    {"AF_LLC", 26},
    {"AF_IB", 27},
    {"AF_MPLS", 28},
    {"AF_CAN", 29},
    {"AF_TIPC", 30},
    {"AF_BLUETOOTH", 31},
    {"AF_IUCV", 32},
    {"AF_RXRPC", 33},
    {"AF_ISDN", 34},
    {"AF_PHONET", 35},
    {"AF_IEEE802154", 36},
    {"AF_CAIF", 37},
    {"AF_ALG", 38},
    {"AF_NFC", 39},
    {"AF_VSOCK", 40},
    {"AF_KCM", 41},
    {"AF_QIPCRTR", 42},
    {"AF_SMC", 43},
    {"AF_XDP", 44},
    {"AF_MCTP", 45},
    {"TIOCSTI", 0x5412},
    {"TIOCLINUX", 0x541C},
    {"TIOCCONS", 0x541D},
    {"TIOCSETD", 0x5423},
    {"PER_LINUX", 0x0000},
    {"PER_LINUX32", 0x0008},
    {"UNAME26", 0x0020000},
    {"ADDR_NO_RANDOMIZE", 0x0040000},
    {"MMAP_PAGE_ZERO", 0x0100000},
    {"ADDR_COMPAT_LAYOUT", 0x0200000},
    {"READ_IMPLIES_EXEC", 0x0400000},
    {"ADDR_LIMIT_32BIT", 0x0800000},
    {"PERSONALITY_QUERY", 0xffffffff},
};

static const struct named errnos[] = {
    {"EPERM", EPERM},
    {"EACCES", EACCES},
    {"ENOSYS", ENOSYS},
    {"EINVAL", EINVAL},
    {"EAFNOSUPPORT", EAFNOSUPPORT},
    {"EOPNOTSUPP", EOPNOTSUPP},
    {"ENOTTY", ENOTTY},
    {"EPROTONOSUPPORT", EPROTONOSUPPORT},
};

static const struct named arches[] = {
    {"x86_64", AUDIT_ARCH_X86_64},   {"x86", AUDIT_ARCH_I386},
    {"aarch64", AUDIT_ARCH_AARCH64}, {"arm", AUDIT_ARCH_ARM},
    {"ppc64le", AUDIT_ARCH_PPC64LE}, {"s390x", AUDIT_ARCH_S390X},
    {"riscv64", AUDIT_ARCH_RISCV64},
};

static const struct named *find_named(const struct named *t, size_t n, const char *name, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(t[i].name) == len && !strncmp(t[i].name, name, len))
			return &t[i];
	return NULL;
}

bool cell_seccomp_name_valid(const char *name)
{
	size_t len = name ? strlen(name) : 0;
	if (len == 0 || len > CELL_SECCOMP_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			  (i > 0 && (c == '-' || c == '_'));
		if (!ok)
			return false;
	}
	return true;
}

const char *cell_seccomp_arch_name(uint32_t arch)
{
	for (size_t i = 0; i < CELL_ARRAY_SIZE(arches); i++)
		if (arches[i].value == arch)
			return arches[i].name;
	return "unknown";
}

void cell_seccomp_syscall_name(uint32_t arch, int nr, char *buf, size_t size)
{
	char *name = NULL;
	if (arch == AUDIT_ARCH_X86_64 && (nr & X32_SYSCALL_BIT))
		name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X32, nr);
	else
		name = seccomp_syscall_resolve_num_arch(arch, nr);
	if (name)
		snprintf(buf, size, "%s", name);
	else
		snprintf(buf, size, "#%d", nr);
	free(name);
}

/* ---- parsing ---- */

/* A field path such as "rules[3].args[0].op" (cut short if ever too long). */
static void fmt_field(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fmt_field(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, size, fmt, ap);
	va_end(ap);
}

struct ctx {
	const char *file;
	struct cell_error *err;
};

static int bad(struct ctx *c, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int bad(struct ctx *c, const char *field, const char *fmt, ...)
{
	char msg[CELL_ERROR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cell_err(c->err, 0, "%s: %s: %s", c->file, field, msg);
	if (c->err)
		c->err->code = EINVAL;
	return -EINVAL;
}

/* Every key of o must be in allowed (NULL-terminated). */
static int only_keys(struct ctx *c, json_t *o, const char *field, const char *const *allowed)
{
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v)
	{
		bool ok = false;
		for (const char *const *a = allowed; *a && !ok; a++)
			ok = !strcmp(*a, k);
		if (!ok)
			return bad(c, field, "unknown key '%.64s'", k);
	}
	return 0;
}

static int get_string(struct ctx *c, json_t *o, const char *key, const char *field, bool required,
		      const char **out)
{
	json_t *v = json_object_get(o, key);
	*out = NULL;
	if (!v)
		return required ? bad(c, field, "missing") : 0;
	if (!json_is_string(v) || !json_string_length(v) ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return bad(c, field, "must be a non-empty string");
	*out = json_string_value(v);
	return 0;
}

/* "A|B|12" of known names and decimal numbers, or a JSON integer >= 0. */
static int parse_value(struct ctx *c, json_t *v, const char *field, uint64_t *out)
{
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0)
			return bad(c, field, "must not be negative");
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v) || !json_string_length(v))
		return bad(c, field, "must be a number or a string of names joined by '|'");
	const char *s = json_string_value(v);
	uint64_t acc = 0;
	while (*s) {
		size_t len = strcspn(s, "|");
		if (len == 0)
			return bad(c, field, "empty name in '%.64s'", json_string_value(v));
		const struct named *n = find_named(constants, CELL_ARRAY_SIZE(constants), s, len);
		if (n) {
			acc |= n->value;
		} else if (s[0] >= '0' && s[0] <= '9') {
			char *end;
			errno = 0;
			unsigned long long x = strtoull(s, &end, 10);
			if (errno || end != s + len)
				return bad(c, field, "'%.*s' is not a decimal number", (int)len, s);
			acc |= x;
		} else {
			return bad(c, field, "unknown name '%.*s'", (int)len, s);
		}
		s += len;
		if (*s == '|' && !*++s)
			return bad(c, field, "ends with '|'");
	}
	*out = acc;
	return 0;
}

static int parse_errno(struct ctx *c, json_t *o, const char *field, int *out)
{
	char f[FIELD_MAX];
	const char *s;
	fmt_field(f, sizeof(f), "%s.errno", field);
	int r = get_string(c, o, "errno", f, true, &s);
	if (r < 0)
		return r;
	const struct named *n = find_named(errnos, CELL_ARRAY_SIZE(errnos), s, strlen(s));
	if (!n)
		return bad(c, f,
			   "unknown errno '%.32s' (EPERM, EACCES, ENOSYS, EINVAL, "
			   "EAFNOSUPPORT, EOPNOTSUPP, ENOTTY, EPROTONOSUPPORT)",
			   s);
	*out = (int)n->value;
	return 0;
}

/* {action, errno, why, log?}: the part every rule shares with foreignAbi/newerSyscalls. */
static int parse_action(struct ctx *c, json_t *o, const char *field, struct action *a)
{
	char f[FIELD_MAX];
	const char *s;
	fmt_field(f, sizeof(f), "%s.action", field);
	int r = get_string(c, o, "action", f, true, &s);
	if (r < 0)
		return r;
	/* Never kill: a denied call fails and the program decides what to do. */
	if (strcmp(s, "errno"))
		return bad(c, f, "unknown action '%.32s' (only \"errno\")", s);
	if ((r = parse_errno(c, o, field, &a->errnum)) < 0)
		return r;
	fmt_field(f, sizeof(f), "%s.why", field);
	if ((r = get_string(c, o, "why", f, true, &s)) < 0)
		return r;
	json_t *log = json_object_get(o, "log");
	a->log = true;
	if (log) {
		fmt_field(f, sizeof(f), "%s.log", field);
		if (!json_is_boolean(log))
			return bad(c, f, "must be true or false");
		a->log = json_is_true(log);
	}
	return 0;
}

static int parse_op(struct ctx *c, json_t *a, const char *field, struct cond *cd)
{
	char f[FIELD_MAX];
	const char *op;
	fmt_field(f, sizeof(f), "%s.op", field);
	int r = get_string(c, a, "op", f, true, &op);
	if (r < 0)
		return r;
	if (!strcmp(op, "eq"))
		cd->op = OP_EQ;
	else if (!strcmp(op, "in"))
		cd->op = OP_IN;
	else if (!strcmp(op, "masked_eq"))
		cd->op = OP_MASKED_EQ;
	else if (!strcmp(op, "has_any"))
		cd->op = OP_HAS_ANY;
	else if (!strcmp(op, "not_in"))
		cd->op = OP_NOT_IN;
	else
		return bad(c, f, "unknown op '%.32s' (eq, in, masked_eq, has_any, not_in)", op);
	static const char *const keys_value[] = {"index", "op", "value", NULL};
	static const char *const keys_masked[] = {"index", "op", "mask", "value", NULL};
	static const char *const keys_in[] = {"index", "op", "values", NULL};
	return only_keys(c, a, field,
			 cd->op == OP_MASKED_EQ			  ? keys_masked
			 : cd->op == OP_NOT_IN || cd->op == OP_IN ? keys_in
								  : keys_value);
}

static int parse_values(struct ctx *c, json_t *a, const char *field, struct cond *cd)
{
	char f[FIELD_MAX];
	json_t *vals = json_object_get(a, "values");
	fmt_field(f, sizeof(f), "%s.values", field);
	if (!json_is_array(vals) || !json_array_size(vals) || json_array_size(vals) > MAX_VALUES)
		return bad(c, f, "must be an array of 1-%d values", MAX_VALUES);
	for (size_t i = 0; i < json_array_size(vals); i++) {
		uint64_t v;
		fmt_field(f, sizeof(f), "%s.values[%zu]", field, i);
		int r = parse_value(c, json_array_get(vals, i), f, &v);
		if (r < 0)
			return r;
		if (v > LOW32)
			return bad(c, f, "in and not_in compare 32-bit values");
		cd->values[cd->n_values++] = (uint32_t)v;
	}
	return 0;
}

static int parse_cond(struct ctx *c, json_t *a, const char *field, struct cond *cd)
{
	char f[FIELD_MAX];
	if (!json_is_object(a))
		return bad(c, field, "must be an object");
	memset(cd, 0, sizeof(*cd));
	int r = parse_op(c, a, field, cd);
	if (r < 0)
		return r;
	json_t *idx = json_object_get(a, "index");
	fmt_field(f, sizeof(f), "%s.index", field);
	if (!json_is_integer(idx) || json_integer_value(idx) < 0 || json_integer_value(idx) > 5)
		return bad(c, f, "must be an argument number 0-5");
	cd->index = (unsigned)json_integer_value(idx);
	if (cd->op == OP_NOT_IN || cd->op == OP_IN)
		return parse_values(c, a, field, cd);
	fmt_field(f, sizeof(f), "%s.value", field);
	json_t *v = json_object_get(a, "value");
	if (!v)
		return bad(c, f, "missing");
	if ((r = parse_value(c, v, f, &cd->value)) < 0)
		return r;
	if (cd->op == OP_HAS_ANY && !cd->value)
		return bad(c, f, "has_any needs at least one bit");
	if (cd->op != OP_MASKED_EQ)
		return 0;
	fmt_field(f, sizeof(f), "%s.mask", field);
	json_t *m = json_object_get(a, "mask");
	if (!m)
		return bad(c, f, "missing");
	if ((r = parse_value(c, m, f, &cd->mask)) < 0)
		return r;
	if (!cd->mask || (cd->value & ~cd->mask))
		return bad(c, f, "value has bits outside the mask: the rule could never match");
	return 0;
}

static int parse_args(struct ctx *c, json_t *args, const char *field, struct rule *ru)
{
	if (!args)
		return 0;
	if (!json_is_array(args) || json_array_size(args) > 6)
		return bad(c, field, "must be an array of at most 6 conditions");
	bool seen[6] = {false};
	for (size_t i = 0; i < json_array_size(args); i++) {
		char f[FIELD_MAX];
		fmt_field(f, sizeof(f), "%s[%zu]", field, i);
		struct cond *cd = &ru->conds[ru->n_conds];
		int r = parse_cond(c, json_array_get(args, i), f, cd);
		if (r < 0)
			return r;
		/* libseccomp compares each argument once per rule. */
		if (seen[cd->index])
			return bad(c, f, "a second condition on argument %u", cd->index);
		seen[cd->index] = true;
		ru->n_conds++;
	}
	return 0;
}

/* A syscall in two rules would make the answer depend on rule order. */
static int check_unique(struct ctx *c, const struct cell_seccomp_profile *p, int nr,
			const char *name, const char *field)
{
	for (size_t i = 0; i < p->n_rules; i++)
		for (size_t k = 0; k < p->rules[i].n_nrs; k++)
			if (p->rules[i].nrs[k] == nr)
				return bad(c, field, "%s is already in rules[%zu]", name, i);
	return 0;
}

static int parse_syscalls(struct ctx *c, json_t *arr, const char *field,
			  const struct cell_seccomp_profile *p, struct rule *ru)
{
	if (!json_is_array(arr) || !json_array_size(arr))
		return bad(c, field, "must be a non-empty array of syscall names");
	ru->nrs = calloc(json_array_size(arr), sizeof(int));
	if (!ru->nrs)
		return cell_err(c->err, ENOMEM, "%s", c->file);
	for (size_t i = 0; i < json_array_size(arr); i++) {
		char f[FIELD_MAX];
		fmt_field(f, sizeof(f), "%s[%zu]", field, i);
		json_t *v = json_array_get(arr, i);
		if (!json_is_string(v))
			return bad(c, f, "must be a syscall name");
		const char *name = json_string_value(v);
		int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, name);
		if (nr == __NR_SCMP_ERROR)
			return bad(c, f, "unknown syscall '%.64s'", name);
		if (nr < 0)
			continue; /* a syscall of other architectures: cannot be called here */
		int r = check_unique(c, p, nr, name, f);
		for (size_t k = 0; r == 0 && k < ru->n_nrs; k++)
			if (ru->nrs[k] == nr)
				r = bad(c, f, "%s is listed twice", name);
		if (r < 0)
			return r;
		ru->nrs[ru->n_nrs++] = nr;
	}
	return 0;
}

static int parse_rule(struct ctx *c, json_t *o, size_t i, struct cell_seccomp_profile *p)
{
	static const char *const keys[] = {"syscalls", "action", "errno", "why",
					   "args",     "log",	 NULL};
	char field[FIELD_MAX], f[FIELD_MAX];
	fmt_field(field, sizeof(field), "rules[%zu]", i);
	if (!json_is_object(o))
		return bad(c, field, "must be an object");
	int r = only_keys(c, o, field, keys);
	if (r < 0)
		return r;
	struct rule *ru = &p->rules[p->n_rules];
	memset(ru, 0, sizeof(*ru));
	fmt_field(f, sizeof(f), "%s.syscalls", field);
	r = parse_syscalls(c, json_object_get(o, "syscalls"), f, p, ru);
	if (r == 0)
		r = parse_action(c, o, field, &ru->act);
	fmt_field(f, sizeof(f), "%s.args", field);
	if (r == 0)
		r = parse_args(c, json_object_get(o, "args"), f, ru);
	if (r < 0) {
		free(ru->nrs);
		return r;
	}
	p->n_rules++;
	return 0;
}

static int parse_special(struct ctx *c, json_t *top, const char *key, bool required,
			 struct action *a, bool *present)
{
	static const char *const keys[] = {"action", "errno", "why", "log", NULL};
	json_t *o = json_object_get(top, key);
	if (present)
		*present = o != NULL;
	if (!o)
		return required ? bad(c, key, "missing") : 0;
	if (!json_is_object(o))
		return bad(c, key, "must be an object");
	int r = only_keys(c, o, key, keys);
	return r < 0 ? r : parse_action(c, o, key, a);
}

static int max_known_syscall(void)
{
	int max = 0;
	for (int nr = 0; nr <= NEWER_LAST; nr++) {
		char *s = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
		if (s)
			max = nr;
		free(s);
	}
	return max;
}

static int parse_top(struct ctx *c, json_t *top, const char *name, struct cell_seccomp_profile *p)
{
	static const char *const keys[] = {
	    "name", "description", "defaultAction", "foreignAbi", "newerSyscalls", "rules", NULL};
	int r = only_keys(c, top, "(top level)", keys);
	const char *s;
	if (r == 0)
		r = get_string(c, top, "name", "name", true, &s);
	if (r < 0)
		return r;
	if (!cell_seccomp_name_valid(s))
		return bad(c, "name",
			   "'%.64s' is not a valid profile name ([a-z0-9][a-z0-9_-]*, "
			   "at most %d)",
			   s, CELL_SECCOMP_NAME_MAX);
	if (name && strcmp(s, name))
		return bad(c, "name", "'%.64s' differs from the file name '%s'", s, name);
	snprintf(p->name, sizeof(p->name), "%s", s);
	if ((r = get_string(c, top, "description", "description", true, &s)) < 0 ||
	    (r = get_string(c, top, "defaultAction", "defaultAction", true, &s)) < 0)
		return r;
	if (strcmp(s, "allow"))
		return bad(c, "defaultAction", "'%.32s': only \"allow\" (a denylist) is supported",
			   s);
	if ((r = parse_special(c, top, "foreignAbi", true, &p->foreign, NULL)) < 0 ||
	    (r = parse_special(c, top, "newerSyscalls", false, &p->newer, &p->has_newer)) < 0)
		return r;
	json_t *rules = json_object_get(top, "rules");
	if (!json_is_array(rules))
		return bad(c, "rules", "must be an array");
	p->rules = calloc(json_array_size(rules) + 1, sizeof(*p->rules));
	if (!p->rules)
		return cell_err(c->err, ENOMEM, "%s", c->file);
	for (size_t i = 0; i < json_array_size(rules); i++)
		if ((r = parse_rule(c, json_array_get(rules, i), i, p)) < 0)
			return r;
	return 0;
}

int cell_seccomp_profile_parse(const char *file, const char *name, const char *text, size_t len,
			       struct cell_seccomp_profile **out, struct cell_error *err)
{
	struct ctx c = {.file = file, .err = err};
	*out = NULL;
	if (len > CELL_SECCOMP_FILE_MAX)
		return bad(&c, "(file)", "larger than %u bytes", CELL_SECCOMP_FILE_MAX);
	json_error_t jerr;
	json_t *top = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(top)) {
		json_decref(top);
		return top ? bad(&c, "(top level)", "must be a JSON object")
			   : bad(&c, "(file)", "line %d: %s", jerr.line, jerr.text);
	}
	struct cell_seccomp_profile *p = calloc(1, sizeof(*p));
	if (!p) {
		json_decref(top);
		return cell_err(err, ENOMEM, "%s", file);
	}
	int r = parse_top(&c, top, name, p);
	json_decref(top);
	if (r < 0) {
		cell_seccomp_profile_free(p);
		return r;
	}
	p->max_known = max_known_syscall();
	*out = p;
	return 0;
}

void cell_seccomp_profile_free(struct cell_seccomp_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_rules; i++)
		free(p->rules[i].nrs);
	free(p->rules);
	free(p);
}

const char *cell_seccomp_profile_name(const struct cell_seccomp_profile *p)
{
	return p->name;
}

/* ---- evaluation (what the compiled filter decides, for notifications) ---- */

static bool cond_matches(const struct cond *cd, uint64_t arg)
{
	switch (cd->op) {
	case OP_EQ:
		return cd->value <= LOW32 ? (arg & LOW32) == cd->value : arg == cd->value;
	case OP_MASKED_EQ:
		return (arg & cd->mask) == cd->value;
	case OP_HAS_ANY:
		return (arg & cd->value) != 0;
	case OP_IN:
	case OP_NOT_IN:
		for (size_t i = 0; i < cd->n_values; i++)
			if ((uint32_t)arg == cd->values[i])
				return cd->op == OP_IN;
		return cd->op == OP_NOT_IN;
	}
	return false;
}

int cell_seccomp_profile_errno(const struct cell_seccomp_profile *p, uint32_t arch, int nr,
			       const uint64_t args[6])
{
	if (arch != seccomp_arch_native() ||
	    (arch == AUDIT_ARCH_X86_64 && ((unsigned)nr & X32_SYSCALL_BIT)))
		return p->foreign.errnum;
	if (p->has_newer && nr > p->max_known && nr <= NEWER_LAST)
		return p->newer.errnum;
	for (size_t i = 0; i < p->n_rules; i++) {
		const struct rule *ru = &p->rules[i];
		bool named = false;
		for (size_t k = 0; k < ru->n_nrs && !named; k++)
			named = ru->nrs[k] == nr;
		if (!named)
			continue;
		bool all = true;
		for (size_t k = 0; k < ru->n_conds && all; k++)
			all = cond_matches(&ru->conds[k], args[ru->conds[k].index]);
		return all ? ru->act.errnum : 0;
	}
	return 0;
}

/* ---- compilation ---- */

/* One condition as alternatives of single libseccomp comparisons (any one matching). */
struct alts {
	struct scmp_arg_cmp *v;
	size_t n, cap;
};

static int alt_add(struct alts *a, unsigned index, enum scmp_compare op, uint64_t x, uint64_t y)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 8;
		struct scmp_arg_cmp *v = realloc(a->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = (struct scmp_arg_cmp){.arg = index, .op = op, .datum_a = x, .datum_b = y};
	return 0;
}

/* The complement of a set of 32-bit values as masked_eq patterns: split on each bit from the
 * top; a branch no value of the set takes is one pattern (the bits fixed so far). */
static int not_in_cubes(struct alts *a, unsigned index, const uint32_t *vals, size_t n, int bit,
			uint32_t mask, uint32_t prefix)
{
	if (n == 0)
		return alt_add(a, index, SCMP_CMP_MASKED_EQ, mask, prefix);
	if (bit < 0)
		return 0;
	uint32_t b = 1u << bit, on[MAX_VALUES], off[MAX_VALUES];
	size_t n_on = 0, n_off = 0;
	for (size_t i = 0; i < n; i++) {
		if (vals[i] & b)
			on[n_on++] = vals[i];
		else
			off[n_off++] = vals[i];
	}
	int r = not_in_cubes(a, index, off, n_off, bit - 1, mask | b, prefix);
	return r < 0 ? r : not_in_cubes(a, index, on, n_on, bit - 1, mask | b, prefix | b);
}

static int cond_alts(const struct cond *cd, struct alts *a)
{
	switch (cd->op) {
	case OP_EQ:
		if (cd->value <= LOW32)
			return alt_add(a, cd->index, SCMP_CMP_MASKED_EQ, LOW32, cd->value);
		return alt_add(a, cd->index, SCMP_CMP_EQ, cd->value, 0);
	case OP_IN:
		for (size_t i = 0; i < cd->n_values; i++)
			if (alt_add(a, cd->index, SCMP_CMP_MASKED_EQ, LOW32, cd->values[i]) < 0)
				return -ENOMEM;
		return 0;
	case OP_MASKED_EQ:
		return alt_add(a, cd->index, SCMP_CMP_MASKED_EQ, cd->mask, cd->value);
	case OP_HAS_ANY:
		for (int bit = 0; bit < 64; bit++) {
			uint64_t b = 1ull << bit;
			if ((cd->value & b) && alt_add(a, cd->index, SCMP_CMP_MASKED_EQ, b, b) < 0)
				return -ENOMEM;
		}
		return 0;
	case OP_NOT_IN:
		return not_in_cubes(a, cd->index, cd->values, cd->n_values, 31, 0, 0);
	}
	return -EINVAL;
}

struct emit {
	scmp_filter_ctx ctx;
	uint32_t action;
	const struct rule *ru;
	struct alts alts[6];
	struct scmp_arg_cmp pick[6];
	size_t added;
	struct ctx *c;
	size_t rule_index;
};

/* Every combination of one alternative per condition is one libseccomp rule. */
static int emit_rules(struct emit *e, size_t depth)
{
	if (depth < e->ru->n_conds) {
		for (size_t i = 0; i < e->alts[depth].n; i++) {
			e->pick[depth] = e->alts[depth].v[i];
			int r = emit_rules(e, depth + 1);
			if (r < 0)
				return r;
		}
		return 0;
	}
	for (size_t k = 0; k < e->ru->n_nrs; k++) {
		if (++e->added > MAX_EXPANSION) {
			char f[32];
			fmt_field(f, sizeof(f), "rules[%zu].args", e->rule_index);
			return bad(e->c, f, "the profile expands to more than %d filter rules",
				   MAX_EXPANSION);
		}
		int r = seccomp_rule_add_array(e->ctx, e->action, e->ru->nrs[k],
					       (unsigned)e->ru->n_conds, e->pick);
		if (r < 0) {
			char f[32];
			fmt_field(f, sizeof(f), "rules[%zu]", e->rule_index);
			return bad(e->c, f, "libseccomp refused the rule: %s", strerror(-r));
		}
	}
	return 0;
}

static uint32_t action_of(const struct action *a, bool notify)
{
	return notify && a->log ? SCMP_ACT_NOTIFY : SCMP_ACT_ERRNO((uint32_t)a->errnum);
}

static int add_rules(scmp_filter_ctx sc, const struct cell_seccomp_profile *p, bool notify,
		     struct ctx *c)
{
	struct emit e = {.ctx = sc, .c = c};
	int r = 0;
	for (size_t i = 0; i < p->n_rules && r == 0; i++) {
		e.ru = &p->rules[i];
		e.rule_index = i;
		e.action = action_of(&e.ru->act, notify);
		memset(e.alts, 0, sizeof(e.alts));
		for (size_t k = 0; k < e.ru->n_conds && r == 0; k++)
			r = cond_alts(&e.ru->conds[k], &e.alts[k]) < 0
				? cell_err(c->err, ENOMEM, "%s", c->file)
				: 0;
		if (r == 0)
			r = emit_rules(&e, 0);
		for (size_t k = 0; k < 6; k++)
			free(e.alts[k].v);
	}
	/* Numbers past what libseccomp can name are syscalls newer than it (a mount-family
	 * call such as open_tree_attr would otherwise pass a denylist unseen). */
	for (int nr = p->max_known + 1; r == 0 && p->has_newer && nr <= NEWER_LAST; nr++)
		if (seccomp_rule_add(sc, action_of(&p->newer, notify), nr, 0) < 0)
			r = bad(c, "newerSyscalls", "libseccomp refused syscall %d", nr);
	return r;
}

int cell_seccomp_compile(const struct cell_seccomp_profile *p, bool notify,
			 struct cell_seccomp_prog *out, struct cell_error *err)
{
	char file[CELL_SECCOMP_NAME_MAX + 16];
	snprintf(file, sizeof(file), "%s.json", p->name);
	struct ctx c = {.file = file, .err = err};
	memset(out, 0, sizeof(*out));
	scmp_filter_ctx sc = seccomp_init(SCMP_ACT_ALLOW);
	if (!sc)
		return cell_err(err, ENOMEM, "%s: seccomp_init", file);
	/* Foreign ABIs (i386 through int 0x80, x32): no rule of a native filter applies to
	 * them, so they are denied whole (socketcall would bypass every socket rule). */
	int r = seccomp_attr_set(sc, SCMP_FLTATR_ACT_BADARCH, action_of(&p->foreign, notify));
	if (r == 0)
		r = seccomp_attr_set(sc, SCMP_FLTATR_CTL_OPTIMIZE, 2); /* binary tree */
	if (r < 0)
		r = cell_err(err, -r, "%s: filter attributes", file);
	if (r == 0)
		r = add_rules(sc, p, notify, &c);
	if (r == 0)
		r = cell_seccomp_export(sc, file, out, err);
	seccomp_release(sc);
	out->notify = notify;
	return r;
}

void cell_seccomp_prog_free(struct cell_seccomp_prog *prog)
{
	if (!prog)
		return;
	free((void *)prog->filter);
	prog->filter = NULL;
	prog->len = 0;
}
