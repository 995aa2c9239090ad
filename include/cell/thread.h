/* Threads that are never joined (a watcher, a timer, one background job). */
#pragma once

/* Start fn(arg) in a detached thread: 0 or -errno. */
int cell_thread_detached(void *(*fn)(void *), void *arg);
