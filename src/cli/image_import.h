/* cell image import and cell image commit (image_import.c), the entries cmd_image.c's
 * dispatcher hands them to: argv[0] is the subcommand. */
#pragma once

int image_import_import(int argc, char **argv);
int image_import_commit(int argc, char **argv);
