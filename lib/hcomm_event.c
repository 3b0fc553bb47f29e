// SPDX-License-Identifier: MIT
/*
 * libhcomm: link events (hcomm_comm_set_event_cb, Documentation/
 * failover.rst).  A transport that notices something about a peer's link
 * calls hcomm__event() from whatever thread noticed it (a reaper, the
 * rdma cm thread, the tcp service thread); the event is queued and the
 * communicator's event thread hands it to the application's callback,
 * outside every lock of the library, one at a time and in order.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hcomm_comm_int.h"

const char *hcomm__event_name(int type)
{
	switch (type) {
	case HCOMM_EVENT_LINK_DOWN:
		return "link-down";
	case HCOMM_EVENT_FAILED_OVER:
		return "failed-over";
	case HCOMM_EVENT_RECOVERED:
		return "recovered";
	case HCOMM_EVENT_PEER_LOST:
		return "peer-lost";
	default:
		return "?";
	}
}

void hcomm__events_init(struct hcomm_comm *c)
{
	struct hcomm_events *e = &c->ev;

	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	e->log = getenv("HCOMM_LOG") && strcmp(getenv("HCOMM_LOG"), "0");
}

/* Stop delivering (the thread ends); later events are ignored. */
void hcomm__events_stop(struct hcomm_comm *c)
{
	struct hcomm_events *e = &c->ev;
	int join;

	pthread_mutex_lock(&e->lock);
	e->closed = 1;
	e->stop = 1;
	join = e->thr_up;
	e->thr_up = 0;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	if (join)
		pthread_join(e->thr, NULL);
}

void hcomm__events_fini(struct hcomm_comm *c)
{
	hcomm__events_stop(c);
	pthread_cond_destroy(&c->ev.cond);
	pthread_mutex_destroy(&c->ev.lock);
}

void hcomm__event(struct hcomm_comm *c, int type, int peer, int xp, int err,
		  uint64_t silent_ns, const char *fmt, ...)
{
	struct hcomm_events *e = &c->ev;
	struct hcomm_event *ev;
	va_list ap;

	pthread_mutex_lock(&e->lock);
	if (e->closed) {
		pthread_mutex_unlock(&e->lock);
		return;
	}
	e->seq++;
	if (e->n == HCOMM_EVQ) {	/* dropped: the seq gap tells */
		pthread_mutex_unlock(&e->lock);
		return;
	}
	ev = &e->q[(e->head + e->n) % HCOMM_EVQ];
	memset(ev, 0, sizeof(*ev));
	ev->size = sizeof(*ev);
	ev->type = (uint32_t)type;
	ev->peer = peer;
	ev->xport = xp;
	ev->err = err;
	ev->time_ns = hcomm__now_ns();
	ev->silent_ns = silent_ns;
	ev->seq = e->seq;
	va_start(ap, fmt);
	vsnprintf(ev->why, sizeof(ev->why), fmt, ap);
	va_end(ap);
	e->n++;
	if (e->log)
		fprintf(stderr, "hcomm: rank %d: event %llu %s: peer %d, %s: "
			"%s\n", c->rank, (unsigned long long)ev->seq,
			hcomm__event_name(type), peer, hcomm__xp_name(xp),
			ev->why);
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
}

int hcomm__in_event_cb(struct hcomm_comm *c)
{
	int in;

	pthread_mutex_lock(&c->ev.lock);
	in = c->ev.thr_up && pthread_equal(pthread_self(), c->ev.thr);
	pthread_mutex_unlock(&c->ev.lock);
	return in;
}

static void *event_main(void *arg)
{
	struct hcomm_comm *c = arg;
	struct hcomm_events *e = &c->ev;
	struct hcomm_event ev;
	hcomm_event_cb cb;
	void *cb_arg;

	pthread_mutex_lock(&e->lock);
	for (;;) {
		while (!e->stop && (!e->cb || !e->n))
			pthread_cond_wait(&e->cond, &e->lock);
		if (e->stop)
			break;
		ev = e->q[e->head];
		e->head = (e->head + 1) % HCOMM_EVQ;
		e->n--;
		cb = e->cb;
		cb_arg = e->arg;
		e->busy = 1;
		pthread_mutex_unlock(&e->lock);
		cb(c, &ev, cb_arg);
		pthread_mutex_lock(&e->lock);
		e->busy = 0;
		pthread_cond_broadcast(&e->cond);
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

HCOMM_EXPORT int hcomm_comm_set_event_cb(struct hcomm_comm *c,
					 hcomm_event_cb cb, void *arg)
{
	struct hcomm_events *e;
	int ret = 0;

	if (!c)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_comm_set_event_cb: no communicator");
	e = &c->ev;
	pthread_mutex_lock(&e->lock);
	if (e->closed) {
		pthread_mutex_unlock(&e->lock);
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_comm_set_event_cb: the communicator "
				   "is being destroyed");
	}
	e->cb = cb;
	e->arg = arg;
	if (cb && !e->thr_up) {
		ret = pthread_create(&e->thr, NULL, event_main, c);
		if (ret) {
			e->cb = NULL;
			pthread_mutex_unlock(&e->lock);
			return hcomm__fail(HCOMM_ERR_NOMEM, ret,
					   "hcomm_comm_set_event_cb: "
					   "pthread_create: %s", strerror(ret));
		}
		e->thr_up = 1;
	}
	pthread_cond_broadcast(&e->cond);
	/* Off: wait for a running callback, unless this is it. */
	if (!cb && e->thr_up && !pthread_equal(pthread_self(), e->thr))
		while (e->busy)
			pthread_cond_wait(&e->cond, &e->lock);
	pthread_mutex_unlock(&e->lock);
	return 0;
}
