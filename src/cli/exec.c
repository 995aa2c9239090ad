/* The command options shared by exec and run. */
#include "exec.h"
#include "parse.h"

int cli_exec_opt(int c, const char *arg, struct cli_exec_req *req, json_t *envs)
{
	int r;
	switch (c) {
	case 'w':
		req->cwd = arg;
		return 1;
	case 'e':
		r = cli_parse_env(envs, arg);
		return r < 0 ? r : 1;
	case 't':
		r = cli_parse_seconds_ms(arg, &req->timeout_ms);
		return r < 0 ? r : 1;
	default:
		return 0;
	}
}
