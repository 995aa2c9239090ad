#include <pthread.h>

#include "cell/thread.h"

int cell_thread_detached(void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	int r = pthread_attr_init(&attr);
	if (r)
		return -r;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t th;
	r = pthread_create(&th, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return -r;
}
