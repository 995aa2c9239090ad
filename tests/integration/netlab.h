/* netlab: a network test lab for one test, so that network tests never send a packet off
 * this machine (DESIGN.md, "Tests and safety rules").
 *
 * Two network namespaces, each made by a forked child that unshared it and holds it until
 * the lab is freed or the test process dies (PR_SET_PDEATHSIG), and held here by fds. No
 * name in /run/netns: nothing outlives the test.
 *
 *   "host"      where a test runs celld (h_world_opts.netns_fd = netlab_host_fd(lab)):
 *               lo up; veth "uplink" 192.0.2.1/24, default route via 192.0.2.254;
 *               net/ipv4/ip_forward=1 (the operator's part of routing sandboxes out).
 *   "internet"  lo up; veth "downlink" 192.0.2.254/24 (replies to 192.0.2.0/24 go back
 *               directly); on lo, /32 each:
 *                 198.51.100.10, 203.0.113.10                       web servers (port 80)
 *                 10.1.2.3, 100.64.1.1, 169.254.169.254, 172.16.5.5, 192.168.7.7
 *                                                                   "forbidden" web servers
 *                 198.51.100.53                                     DNS server (53/udp)
 *                 203.0.113.53                                      rogue DNS server
 *               Every web address also has a UDP sink on port 9 (discard: counts datagrams).
 *
 * A web server answers any request with 200 and the body "hello from <its address>\n". The
 * DNS server answers A queries from a table the test changes at runtime (netlab_dns_set),
 * NXDOMAIN for names not in it (an empty NOERROR answer for other types of a known name);
 * the rogue server answers every A query with 203.0.113.10. The servers are one thread of
 * the test process, its sockets made inside "internet" (a socket keeps the namespace it was
 * made in). Each counts what it got per client source address (TCP: accepted connections;
 * UDP: datagrams, well formed or not), so a test proves that a blocked packet never
 * arrived, against a server that exists.
 *
 * Everything asserts (Check): a lab that cannot be built fails the test. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

#define NETLAB_HOST_ADDR    "192.0.2.1"
#define NETLAB_GATEWAY	    "192.0.2.254"
#define NETLAB_WEB1	    "198.51.100.10"
#define NETLAB_WEB2	    "203.0.113.10"
#define NETLAB_DNS	    "198.51.100.53"
#define NETLAB_ROGUE_DNS    "203.0.113.53"
#define NETLAB_ROGUE_ANSWER NETLAB_WEB2
#define NETLAB_HTTP_PORT    80
#define NETLAB_DNS_PORT	    53
#define NETLAB_SINK_PORT    9
/* The forbidden web servers, NULL-terminated: private (RFC 1918), CGNAT, link-local (cloud
 * metadata). */
extern const char *const netlab_forbidden[];

/* Names in the DNS table from the start (netlab_dns_set changes them):
 *   web1.test, allowed.test -> 198.51.100.10    web2.test -> 203.0.113.10
 *   intranet.test -> 10.1.2.3    cgnat.test -> 100.64.1.1    metadata.test -> 169.254.169.254
 *   private172.test -> 172.16.5.5    private192.test -> 192.168.7.7 */
#define NETLAB_DNS_TTL 5

enum netlab_proto { NETLAB_TCP, NETLAB_UDP };

struct netlab;

/* Build the lab; asserts. Call it from the test's own thread: the holders
 * die with the thread that forked them (PR_SET_PDEATHSIG follows the thread). */
struct netlab *netlab_new(void);
/* Stop the servers, close everything, end both namespaces (their links with them). NULL is
 * a no-op. */
void netlab_free(struct netlab *lab);

/* The namespaces' fds (owned by the lab, close-on-exec) and paths any process of this
 * machine may open while the lab lives ("/proc/<holder>/ns/net"). */
int netlab_host_fd(const struct netlab *lab);
int netlab_internet_fd(const struct netlab *lab);
const char *netlab_host_path(const struct netlab *lab);

/* Set (addr: dotted IPv4) or remove (addr NULL) name in the DNS server's table. */
void netlab_dns_set(struct netlab *lab, const char *name, const char *addr);

/* What a server got: connections (TCP, port 80 of a web address) or datagrams (UDP: port
 * 53 of a DNS address, port 9 of a web address) at addr:port, from the source address from
 * (NULL: from anyone). Asserts that such a server exists. */
unsigned netlab_hits(struct netlab *lab, enum netlab_proto proto, const char *addr, uint16_t port,
		     const char *from);
/* The same summed over every server of the lab. */
unsigned netlab_hits_total(struct netlab *lab);

/* Run fn(arg) on a thread that entered the host namespace; its return value. */
int netlab_in_host(struct netlab *lab, int (*fn)(void *arg), void *arg);
/* Run argv (argv[0] a path) inside the host namespace (nsenter --net), capturing its output
 * like h_run; returns res->status. */
int netlab_host_run(struct netlab *lab, char *const argv[], int timeout_s, struct h_proc *res);

/* Client helpers, run in the namespace ns_fd refers to (a short-lived thread enters it):
 * an HTTP GET of http://addr:port/ whose body goes into body (NUL-terminated, at most
 * size - 1 bytes); 0 or -errno (-ETIMEDOUT after timeout_ms). */
int netlab_http_get(int ns_fd, const char *addr, uint16_t port, int timeout_ms, char *body,
		    size_t size);
/* An A query for name to server:53; the first answer's address into addr (INET_ADDRSTRLEN),
 * or "" for NXDOMAIN/no answer. 0 on any answer, -errno (-ETIMEDOUT) without one. */
int netlab_dns_query(int ns_fd, const char *server, const char *name, int timeout_ms,
		     char addr[16]);
