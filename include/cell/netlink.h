/* rtnetlink for a sandbox's network: veth pairs, links, IPv4 addresses and routes, through
 * libmnl on a NETLINK_ROUTE socket. Never by running `ip`.
 *
 * A handle talks to one network namespace: the one its socket was created in (a netlink
 * socket keeps the namespace it was created in, whoever uses it later). cell_nl_open makes
 * the socket on a short-lived thread that enters the namespace and exits, so the caller's
 * thread never changes namespace and nothing else of the caller's sees the change.
 *
 * Every request asks for an ACK (NLM_F_ACK) and waits for it, with its sequence number and
 * this socket's port id checked; a reply to an earlier request (one given up after the
 * receive timeout) is skipped. The receive buffer is one bounded stack buffer per call, the
 * requests are built in another: nothing is allocated after cell_nl_open. A handle is for
 * one thread at a time (a request and its answers must not interleave with another's).
 *
 * Names of interfaces are checked before any syscall (1..IFNAMSIZ-1 bytes, no '/', ':' or
 * whitespace, not "." or ".."): -EINVAL. Errors are -errno with a cell_error naming the
 * operation and the interface, plus the kernel's own explanation when it gives one
 * (extended ACK), e.g. "creating veth cell0badf00d (peer eth0 in netns fd 7): File exists".
 *
 * The data path this serves (issue 11), per sandbox:
 *   host side:    veth "cell<8 hex>" up, a host address /32 (the gateway the sandbox sees),
 *                 a /32 route to the sandbox's address via the veth (scope link);
 *   sandbox side: the peer, created directly in the sandbox's namespace as "eth0", up, its
 *                 address /32 with the host address as point-to-point peer, a default route
 *                 via the host address with RTNH_F_ONLINK (the gateway is in no subnet of
 *                 the sandbox's), and "lo" up.
 * No bridge: no two sandboxes share a layer-2 segment. Deleting either end of a veth
 * removes both, and a namespace that ends takes its end (and so the pair) with it.
 *
 * Sysctls the caller sets (not this module's business, except through cell_net_sysctl):
 *   in the sandbox's namespace: net/ipv6/conf/all/disable_ipv6=1 and
 *     net/ipv6/conf/default/disable_ipv6=1 (before the veth peer is created there, so that
 *     eth0 never gets an IPv6 link-local address) while IPv6 is not policed;
 *   on the host side, per veth: net/ipv4/conf/<veth>/rp_filter=1 (strict: drop packets
 *     whose source is not routed back through this veth, i.e. anything but the sandbox's
 *     own address), net/ipv4/conf/<veth>/proxy_arp=0, net/ipv4/conf/<veth>/accept_local=0,
 *     net/ipv6/conf/<veth>/disable_ipv6=1; and net/ipv4/ip_forward=1 in the host's
 *     namespace for routing to the outside (the host-wide one: the operator's to allow).
 *   Note that the kernel uses max(conf/all/rp_filter, conf/<dev>/rp_filter). */
#pragma once

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cell/error.h"

/* The bound of one receive (libmnl's MNL_SOCKET_BUFFER_SIZE on 4 KiB pages and above: the
 * kernel sizes a dump's messages by the reader's buffer, so a dump never overflows it). */
#define CELL_NL_RECV_MAX 8192
/* How long a request waits for its answer before -ETIMEDOUT (the kernel answers at once;
 * this only bounds a wedged kernel). */
#define CELL_NL_TIMEOUT_MS 5000

struct mnl_socket;

struct cell_nl {
	struct mnl_socket *sock; /* NULL when closed */
	uint32_t portid;
	uint32_t seq; /* of the last request sent */
};

/* A NETLINK_ROUTE socket (close-on-exec) in the network namespace netns_fd refers to, or in
 * the caller's with netns_fd == -1. Needs CAP_SYS_ADMIN for another namespace. -EBADF for a
 * negative fd other than -1 or a closed one, -EINVAL for an fd that is no network
 * namespace. */
int cell_nl_open(struct cell_nl *nl, int netns_fd, struct cell_error *err);
/* Safe on a closed or zeroed handle, and twice. */
void cell_nl_close(struct cell_nl *nl);

/* True when name is a valid interface name (see above). */
bool cell_nl_name_valid(const char *name);

/* A veth pair: name in nl's namespace, its peer created directly in the namespace
 * peer_netns_fd refers to (-1: nl's own) as peer_name (e.g. "eth0"). Both down, no
 * addresses. -EEXIST when name exists in nl's namespace or peer_name in the peer's (the
 * kernel does not say which; the message names both); nothing is left behind on failure.
 * The kernel resolves peer_netns_fd in the caller's fd table (rtnetlink runs in the
 * sender's context). */
int cell_nl_veth_create(struct cell_nl *nl, const char *name, const char *peer_name,
			int peer_netns_fd, struct cell_error *err);

/* Delete the link name (either end of a veth deletes both). -ENODEV when there is none.
 * A veth's delete costs about 20 ms of kernel time (unregistering waits for RCU grace
 * periods; `ip link del` takes as long), against under 1 ms for the whole set-up: keep it
 * off a request's critical path. A sandbox's namespace that ends also takes the pair with
 * it, in the kernel's own time. */
int cell_nl_link_delete(struct cell_nl *nl, const char *name, struct cell_error *err);

/* Set the link up or down / set its MTU. -ENODEV when there is no such link. */
int cell_nl_link_set_up(struct cell_nl *nl, const char *name, bool up, struct cell_error *err);
int cell_nl_link_set_mtu(struct cell_nl *nl, const char *name, uint32_t mtu,
			 struct cell_error *err);

/* The ifindex (> 0) of name in nl's namespace, or -ENODEV. */
int cell_nl_link_index(struct cell_nl *nl, const char *name, struct cell_error *err);

/* The bytes name received and sent (IFLA_STATS64), or -ENODEV. */
int cell_nl_link_bytes(struct cell_nl *nl, const char *name, uint64_t *rx, uint64_t *tx,
		       struct cell_error *err);

/* The links of nl's namespace whose names start with prefix ("" for all), for
 * reconciliation after a restart: their names go into names[0..cap-1] in the kernel's
 * order. Returns how many there are; -ENOSPC (names holds the first cap) when more than
 * cap. */
int cell_nl_link_list(struct cell_nl *nl, const char *prefix, char (*names)[IFNAMSIZ], size_t cap,
		      struct cell_error *err);

/* Add the IPv4 address local/prefix_len to name (scope global). peer: NULL, or the other
 * end of a point-to-point link (IFA_ADDRESS): then the kernel also adds a route to
 * peer/prefix_len via name (with prefix_len 32: a host route to the peer). -EEXIST when
 * name has it already. */
int cell_nl_addr_add4(struct cell_nl *nl, const char *name, struct in_addr local,
		      unsigned prefix_len, const struct in_addr *peer, struct cell_error *err);

/* Add the route dst/prefix_len via the device name, scope link (prefix_len 32: a host
 * route), in the main table. -EEXIST when the route exists. */
int cell_nl_route_add4_dev(struct cell_nl *nl, const char *name, struct in_addr dst,
			   unsigned prefix_len, struct cell_error *err);
/* Add the default route via gateway gw out of name, onlink (RTNH_F_ONLINK: gw need not be
 * in a subnet of name's, as the host side's address never is in the sandbox's). */
int cell_nl_route_add4_default_onlink(struct cell_nl *nl, const char *name, struct in_addr gw,
				      struct cell_error *err);

/* Write value to the sysctl /proc/sys/<path> as seen in the network namespace netns_fd
 * refers to (-1: the caller's). path is relative and must start with "net/" (only the
 * network sysctls are per namespace), e.g. "net/ipv6/conf/all/disable_ipv6"; components
 * of [A-Za-z0-9_.-] (no "." or ".." component), at most 255 bytes. The file is opened on a
 * short-lived thread that entered the namespace, beneath /proc/sys/net with no symlink
 * followed. */
int cell_net_sysctl(int netns_fd, const char *path, const char *value, struct cell_error *err);
