/* config.c: celld's configuration, fixed once the daemons start (set by main.c) */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "cell/cgroup.h"
#include "cell/error.h"

/* Unauthenticated TCP connections (gate.c): each costs celld one fd and a table slot. */
#define CELLD_DEFAULT_PENDING_MAX    1024
#define CELLD_DEFAULT_PENDING_PER_IP 64
#define CELLD_DEFAULT_KEYLESS_PER_IP 256
#define CELLD_DEFAULT_HEAD_TIMEOUT_S 10
/* Connections the port proxy (api_proxy.c) holds open to one sandbox's apps at once. */
#define CELLD_DEFAULT_PROXY_MAX 128

struct celld_config {
	char *state_dir;  /* canonical absolute path */
	char *images_dir; /* canonical absolute path */
	char *socket_path;
	char *listen;	  /* HOST:PORT, NULL with --no-tcp */
	char *e2b_listen; /* HOST:PORT of the E2B API (--e2b-listen), NULL: off */
	char *api_key;	  /* required on TCP (either API); NULL without a TCP listener */
	int init_fd;	  /* sealed memfd holding cell-init */
	int sandboxes_fd; /* <state>/sandboxes */
	const struct cell_cgroup_ops *cgroup;
	char cgroup_prefix[32]; /* cgroup instance dir, for the log: "cell" or "cell-<8 hex>" */
	char *policies_dir;	/* canonical absolute path: seccomp/, resources/ */
	int policies_fd;	/* O_PATH of policies_dir */
	/* The TCP gate (gate.c): connections not yet authenticated. */
	unsigned tcp_pending_max;    /* held at once, in all */
	unsigned tcp_pending_per_ip; /* held at once from one client (IPv6: one /64) */
	unsigned tcp_keyless_per_ip; /* connections of anonymous credentials from one client */
	unsigned tcp_head_timeout_s; /* for the whole head of the first request */
	unsigned proxy_max;	     /* proxied connections per sandbox (--proxy-max-connections) */
	/* Host-name routing of preview URLs (--preview-domain): "<port>-<id>.<domain>" on the
	 * API listeners is the port proxy of that sandbox and port; NULL: off. Lowercase. */
	char *preview_domain;
	/* E2B's host names on the E2B listener (--e2b-domain): "<port>-<id>.<domain>" is that
	 * sandbox's port with E2B's traffic rules (e2b_api.c); NULL: off. Lowercase. */
	char *e2b_domain;
	/* Host directories TCP clients may mount below (--volume-root; canonical paths). */
	char **volume_roots;
	size_t n_volume_roots;
	bool volume_shared_writers; /* --volume-shared-writers: ReadWriteMany allowed */
	/* Networking (network.c). The sandboxes' subnet: first address in host byte order
	 * and prefix length (--subnet); the resolver's upstream, "ADDR[:PORT]" (--dns-upstream;
	 * NULL: the host's resolv.conf); the mode of a create that names none
	 * (--network-default: "none", "public" or "limited"). */
	uint32_t subnet;
	unsigned subnet_prefix;
	char *dns_upstream;
	char network_default[16];
	/* The NFLOG group of the log of dropped packets (--nflog-group; netlog.h), 0: none. */
	unsigned nflog_group;
};

extern struct celld_config celld;

/* policies/<file> parsed: a JSON object in *out (a new reference); -ENOENT (err set) when
 * the file is missing, -EINVAL with err naming the file and line when it is no JSON
 * object, another -errno when it cannot be read. */
int config_policy_json(const char *file, size_t max, json_t **out, struct cell_error *err);

/* --volume-root DIR: DIR made canonical (it must exist and be a directory) and added;
 * prints why not and returns -errno. */
int config_add_volume_root(const char *dir);
/* --subnet CIDR: an IPv4 a.b.c.d/len without host bits, len 8..28; prints why not and
 * returns -EINVAL. */
int config_set_subnet(const char *cidr);
/* The default of --subnet: outside RFC 1918, in the benchmarking range of RFC 2544 that no
 * public host and few internal networks use. */
#define CELLD_DEFAULT_SUBNET "198.19.0.0/16"
/* The default of --nflog-group. NFLOG groups are shared by every program of a network
 * namespace and only one socket may bind each: 0 is the default of iptables' NFLOG and of
 * ulogd's examples, the small numbers are what other tools' examples use; 4242 is clear of
 * them. A second celld on the same host gives its own. */
#define CELLD_DEFAULT_NFLOG_GROUP 4242
