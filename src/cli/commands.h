/* The cell CLI's subcommands, one entry point each (cmd_NAME.c), called by main.c only. */
#pragma once

int cmd_run(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_shell(int argc, char **argv);
int cmd_attach(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_pause(int argc, char **argv);
int cmd_resume(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_keepalive(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_logs(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_fork(int argc, char **argv);
int cmd_cp(int argc, char **argv);
int cmd_fs(int argc, char **argv);
int cmd_image(int argc, char **argv);
int cmd_volume(int argc, char **argv);
int cmd_skill(int argc, char **argv);
int cmd_network(int argc, char **argv);
int cmd_port(int argc, char **argv);
int cmd_forward(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_selftest(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_completion(int argc, char **argv);
