/* cell completion: bash and zsh completion scripts for cell.
 *
 * The scripts hold no list of commands or options: they ask the cell they complete for
 * its --help (cell's, a command's) when a word is completed, so a new flag or command is
 * offered the moment it is in its help, and tests/completion-check proves every long
 * option of every command's help is. Sandbox IDs come from `cell ls -q`, else from the
 * first column of `cell ls`. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "error.h"
#include "global.h"

/* Shell functions both scripts share (bash and zsh run them alike). */
static const char helpers[] =
    "# What cell offers is read from its own --help when a word is completed (commands,\n"
    "# options, subcommands, which options take a value, which commands take a sandbox ID),\n"
    "# so this script never lags behind the cell it completes. Sandbox IDs come from\n"
    "# `cell ls -q`, else from the first column of `cell ls`.\n"
    "_cell_help() { # COMMAND PROGRAM [ARG...]: the help of COMMAND (\"\": cell's own)\n"
    "\tlocal cmd=$1\n"
    "\tshift\n"
    "\t\"$@\" ${cmd:+\"$cmd\"} --help 2>/dev/null\n"
    "}\n"
    "_cell_commands() { # PROGRAM [ARG...]\n"
    "\t_cell_help \"\" \"$@\" | awk '/^Commands:/ { on = 1; next }\n"
    "\t\ton && /^  [a-z]/ { print $1; next } on { exit }'\n"
    "}\n"
    "_cell_options() { # COMMAND PROGRAM [ARG...]\n"
    "\t_cell_help \"$@\" | awk '/^ +-/ { for (i = 1; i <= NF; i++) { w = $i; sub(/,$/, \"\", w)\n"
    "\t\tif (w !~ /^--?[A-Za-z0-9][A-Za-z0-9-]*$/) break; print w } }'\n"
    "}\n"
    "_cell_subcommands() { # COMMAND PROGRAM [ARG...]\n"
    "\t_cell_help \"$@\" | awk -v cmd=\"$1\" '{ line = $0; sub(/^Usage:/, \"\", line)\n"
    "\t\tn = split(line, w, \" \") }\n"
    "\t\tn >= 3 && w[1] == \"cell\" && w[2] == cmd && w[3] ~ /^[a-z][a-z-]*$/ { print w[3]; next "
    "}\n"
    "\t\t/^  [a-z][a-z-]* +[[A-Z]/ { print $1 }' | sort -u\n"
    "}\n"
    "_cell_takes_value() { # COMMAND OPTION PROGRAM [ARG...]: OPTION is followed by a value\n"
    "\tlocal cmd=$1 opt=$2\n"
    "\tshift 2\n"
    "\tcase $opt in -?*) ;; *) return 1 ;; esac\n"
    "\t_cell_help \"$cmd\" \"$@\" | awk -v opt=\"$opt\" '/^ +-/ { hit = 0\n"
    "\t\tfor (i = 1; i <= NF; i++) { w = $i; sub(/,$/, \"\", w)\n"
    "\t\t\tif (w !~ /^--?[A-Za-z0-9][A-Za-z0-9-]*$/) { found = found || (hit && $i ~ /^[A-Z]/); "
    "break }\n"
    "\t\t\tif (w == opt) hit = 1 } }\n"
    "\t\tEND { exit !found }'\n"
    "}\n"
    "_cell_wants_id() { # COMMAND PROGRAM [ARG...]: a usage line of COMMAND names an ID\n"
    "\t_cell_help \"$@\" | awk '/^(Usage:)? *cell / && / ID/ { found = 1 } END { exit !found }'\n"
    "}\n"
    "_cell_ids() { # PROGRAM [ARG...]\n"
    "\t\"$@\" ls -q 2>/dev/null || \"$@\" ls 2>/dev/null | awk 'NR > 1 { print $1 }'\n"
    "}\n";

/* Each script: its head (zsh's must begin with #compdef), the helpers, its body. */
static const char bash_head[] =
    "# bash completion for cell: eval \"$(cell completion bash)\", or install as\n"
    "# share/bash-completion/completions/cell (make install does).\n";
static const char bash_body[] =
    "_cell() {\n"
    "\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}\n"
    "\tlocal -a prog=(\"${COMP_WORDS[0]}\")\n"
    "\tlocal i cmd= words=\n"
    "\tfor ((i = 1; i < COMP_CWORD; i++)); do\n"
    "\t\tcase ${COMP_WORDS[i]} in\n"
    "\t\t--socket) prog+=(--socket \"${COMP_WORDS[i + 1]}\"); i=$((i + 1)) ;;\n"
    "\t\t-*) prog+=(\"${COMP_WORDS[i]}\") ;;\n"
    "\t\t*) cmd=${COMP_WORDS[i]}; break ;;\n"
    "\t\tesac\n"
    "\tdone\n"
    "\tCOMPREPLY=()\n"
    "\tif [[ -z $cmd ]]; then\n"
    "\t\tif [[ $cur == -* ]]; then\n"
    "\t\t\twords=$(_cell_options \"\" \"${prog[@]}\")\n"
    "\t\telse\n"
    "\t\t\twords=$(_cell_commands \"${prog[@]}\")\n"
    "\t\tfi\n"
    "\t\tCOMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
    "\t\treturn\n"
    "\tfi\n"
    "\t[[ $cur == -* ]] || case $cmd in\n"
    "\thelp) COMPREPLY=($(compgen -W \"$(_cell_commands \"${prog[@]}\")\" -- \"$cur\")); return "
    ";;\n"
    "\tcompletion) COMPREPLY=($(compgen -W \"bash zsh\" -- \"$cur\")); return ;;\n"
    "\tesac\n"
    "\tlocal j\n"
    "\tfor ((j = i + 1; j < COMP_CWORD; j++)); do\n"
    "\t\t[[ ${COMP_WORDS[j]} == -- ]] && return # the command in the sandbox: files\n"
    "\tdone\n"
    "\tif [[ $cur == -* ]]; then\n"
    "\t\tCOMPREPLY=($(compgen -W \"$(_cell_options \"$cmd\" \"${prog[@]}\")\" -- \"$cur\"))\n"
    "\t\treturn\n"
    "\tfi\n"
    "\t_cell_takes_value \"$cmd\" \"$prev\" \"${prog[@]}\" && return # a value: files\n"
    "\t((COMP_CWORD == i + 1)) && words=$(_cell_subcommands \"$cmd\" \"${prog[@]}\")\n"
    "\t_cell_wants_id \"$cmd\" \"${prog[@]}\" && words+=\" $(_cell_ids \"${prog[@]}\")\"\n"
    "\tCOMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
    "}\n"
    "complete -o default -F _cell cell\n";

static const char zsh_head[] =
    "#compdef cell\n"
    "# zsh completion for cell: source <(cell completion zsh) after compinit, or install\n"
    "# as _cell in a directory of $fpath (make install: share/zsh/site-functions).\n";
static const char zsh_body[] =
    "_cell() {\n"
    "\tlocal -a prog cands\n"
    "\tprog=(\"${words[1]}\")\n"
    "\tlocal i j cmd= cur=${words[CURRENT]} prev=${words[CURRENT - 1]}\n"
    "\tfor ((i = 2; i < CURRENT; i++)); do\n"
    "\t\tcase ${words[i]} in\n"
    "\t\t--socket) prog+=(--socket \"${words[i + 1]}\"); i=$((i + 1)) ;;\n"
    "\t\t-*) prog+=(\"${words[i]}\") ;;\n"
    "\t\t*) cmd=${words[i]}; break ;;\n"
    "\t\tesac\n"
    "\tdone\n"
    "\tif [[ -z $cmd ]]; then\n"
    "\t\tif [[ $cur == -* ]]; then\n"
    "\t\t\tcompadd -- ${(f)\"$(_cell_options \"\" \"${prog[@]}\")\"}\n"
    "\t\telse\n"
    "\t\t\tcompadd -- ${(f)\"$(_cell_commands \"${prog[@]}\")\"}\n"
    "\t\tfi\n"
    "\t\treturn\n"
    "\tfi\n"
    "\t[[ $cur == -* ]] || case $cmd in\n"
    "\thelp) compadd -- ${(f)\"$(_cell_commands \"${prog[@]}\")\"}; return ;;\n"
    "\tcompletion) compadd -- bash zsh; return ;;\n"
    "\tesac\n"
    "\tfor ((j = i + 1; j < CURRENT; j++)); do\n"
    "\t\t[[ ${words[j]} == -- ]] && { _files; return; }\n"
    "\tdone\n"
    "\tif [[ $cur == -* ]]; then\n"
    "\t\tcompadd -- ${(f)\"$(_cell_options \"$cmd\" \"${prog[@]}\")\"}\n"
    "\t\treturn\n"
    "\tfi\n"
    "\t_cell_takes_value \"$cmd\" \"$prev\" \"${prog[@]}\" && { _files; return; }\n"
    "\t((CURRENT == i + 1)) && cands+=(${(f)\"$(_cell_subcommands \"$cmd\" \"${prog[@]}\")\"})\n"
    "\t_cell_wants_id \"$cmd\" \"${prog[@]}\" && cands+=(${(f)\"$(_cell_ids \"${prog[@]}\")\"})\n"
    "\tif ((${#cands})); then\n"
    "\t\tcompadd -- \"${cands[@]}\"\n"
    "\telse\n"
    "\t\t_files\n"
    "\tfi\n"
    "}\n"
    "if [[ ${funcstack[1]} == _cell ]]; then\n"
    "\t_cell \"$@\"\n"
    "else\n"
    "\tcompdef _cell cell\n"
    "fi\n";

static void completion_usage(FILE *f)
{
	fprintf(f, "Usage: cell completion bash|zsh\n"
		   "\n"
		   "Print a completion script for bash or zsh: commands, their options and\n"
		   "subcommands (read from cell's own help when completing) and sandbox IDs.\n"
		   "\n"
		   "Options:\n"
		   "  -h, --help  this help\n"
		   "\n"
		   "Examples: eval \"$(cell completion bash)\"      (in ~/.bashrc)\n"
		   "          source <(cell completion zsh)      (in ~/.zshrc, after compinit)\n");
}

int cmd_completion(int argc, char **argv)
{
	int rc = cli_global_opts_only(argc, argv, "+h", "completion", completion_usage);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_error_usage("completion", CLI_EXIT_USAGE,
				       "takes one shell: bash or zsh");
	const char *shell = argv[optind];
	bool bash = !strcmp(shell, "bash");
	if (!bash && strcmp(shell, "zsh"))
		return cli_error_usage("completion", CLI_EXIT_USAGE,
				       "unknown shell '%.40s' (bash or zsh)", shell);
	fputs(bash ? bash_head : zsh_head, stdout);
	fputs(helpers, stdout);
	fputs(bash ? bash_body : zsh_body, stdout);
	return CLI_EXIT_OK;
}
