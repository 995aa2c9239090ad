/* celld's configuration: one global, set by main.c before the daemons start and read-only
 * afterwards. A leaf, so every module can read it without depending on main.c. */
#include "config.h"

struct celld_config celld = {.init_fd = -1,
			     .sandboxes_fd = -1,
			     .policies_fd = -1,
			     .tcp_pending_max = CELLD_DEFAULT_PENDING_MAX,
			     .tcp_pending_per_ip = CELLD_DEFAULT_PENDING_PER_IP,
			     .tcp_head_timeout_s = CELLD_DEFAULT_HEAD_TIMEOUT_S};
