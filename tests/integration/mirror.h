/* mirror: a package mirror inside the network test lab (netlab.h), so that a sandbox's
 * apt-get, pip and npm install packages without a packet leaving this machine.
 *
 * One static-file HTTP server on MIRROR_ADDR:80 (an address it adds to the lab's
 * "internet" namespace, on lo), its listening socket made inside that namespace, one thread
 * of the test process. The lab's DNS maps the real registries' names to it:
 *
 *   deb.debian.org          /debian: a Debian repository, suite bookworm, component main,
 *                           one package `cell-hello` (Architecture all; /usr/bin/cell-hello
 *                           prints MIRROR_GREETING), built with dpkg-deb; Release with the
 *                           indexes' SHA256 (unsigned: sources.list says [trusted=yes])
 *   pypi.org                /simple/ (PEP 503): cell-hello, whose link leads to
 *   files.pythonhosted.org  /packages/…/cell_hello-1.0-py3-none-any.whl (a wheel written
 *                           here, stored zip; `import cell_hello` prints the greeting)
 *   registry.npmjs.org      /cell-hello (the package document: versions, dist.tarball,
 *                           shasum, integrity) and /cell-hello/-/cell-hello-1.0.0.tgz
 *                           (npm pack's layout, made with tar; require() gives the greeting)
 *
 * A request is served from <fixtures>/<Host header>/<path>; a directory from its
 * index.html or index.json. Anything else is 404. The fixtures are written at mirror_new
 * into a temp dir under the suite's dir (so the harness removes it even after a crash) and
 * removed by mirror_free. Every request is logged ("host path status"), so a test proves
 * which registry served what.
 *
 * Everything asserts (Check). */
#pragma once

#include <stdbool.h>

#include "netlab.h"

#define MIRROR_ADDR	"198.51.100.20"
#define MIRROR_GREETING "hello from the mirror"

/* The names the lab's DNS maps to MIRROR_ADDR, NULL-terminated. */
extern const char *const mirror_names[];

struct mirror;

/* Write the fixtures, add MIRROR_ADDR to the lab's internet, start the server, map
 * mirror_names in the lab's DNS. */
struct mirror *mirror_new(struct netlab *lab);
/* Stop the server, remove the fixtures. NULL is a no-op. */
void mirror_free(struct mirror *m);

/* The Debian architecture the repository's index is for (the host's, which is the
 * image's: debootstrap built it here). */
const char *mirror_deb_arch(const struct mirror *m);

/* Requests answered with status (< 0: any) for host (NULL: any) whose path ends with suffix
 * (NULL: any). */
unsigned mirror_count(struct mirror *m, const char *host, const char *suffix, int status);
/* The request log, one "host path status" line each (malloc'd). */
char *mirror_log(struct mirror *m);
