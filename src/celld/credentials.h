/* Every credential celld takes in a request, named once: each API's key header, E2B's
 * sandbox tokens, the preview token's header, cookie and query parameter. The APIs take
 * their names from here, and the port proxy strips every one of them from what reaches an
 * app (proxyhead.c), whichever listener the request came in on: a credential of one API is
 * still celld's on the other's listener. */
#pragma once

#include "preview.h"

#define CREDENTIALS_OPENSANDBOX_KEY "OPEN-SANDBOX-API-KEY"     /* the OpenSandbox API's key */
#define CREDENTIALS_E2B_KEY	    "X-API-Key"		       /* the same key, on E2B's listener */
#define CREDENTIALS_E2B_ENVD	    "X-Access-Token"	       /* a sandbox's envdAccessToken */
#define CREDENTIALS_E2B_TRAFFIC	    "E2B-Traffic-Access-Token" /* its trafficAccessToken */
/* A port's preview token: PREVIEW_HEADER, PREVIEW_COOKIE and PREVIEW_QUERY (preview.h). */
