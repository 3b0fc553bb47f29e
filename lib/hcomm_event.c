// SPDX-License-Identifier: MIT
/*
 * libhcomm: link events (hcomm_comm_set_event_cb, Documentation/
 * failover.rst).  A transport that notices something about a peer's link
 * calls hcomm__event() from whatever thread noticed it (a reaper, the
 * rdma cm thread, the tcp service thread); the event is queued and the
 * communicator's event thread hands it to the application's callback,
 * outside every lock of the library, one at a time and in order, and to
 * each listener a library layered on libhcomm added
 * (hcomm_comm_event_listen: libpypto records them in its runs).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hcomm_comm_int.h"

HCOMM_EXPORT const char *hcomm_event_name(int type)
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

	/* before the transport fails the peer's requests: callers read it */
	if (type == HCOMM_EVENT_PEER_LOST && c->lost && peer >= 0 &&
	    peer < c->size)
		__atomic_store_n(&c->lost[peer], 1, __ATOMIC_RELEASE);
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
			hcomm_event_name(type), peer, hcomm__xp_name(xp),
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

/*
 * Each event goes to each subscriber in turn: the application's callback,
 * then the listeners by slot, each as subscribed when its turn comes (one
 * removed meanwhile is skipped).  e->cur names the one being called, so
 * that removing a subscriber waits for its own call only.
 */
static void *event_main(void *arg)
{
	struct hcomm_comm *c = arg;
	struct hcomm_events *e = &c->ev;
	struct hcomm_event ev;
	hcomm_event_cb cb;
	void *cb_arg;
	int k;

	pthread_mutex_lock(&e->lock);
	for (;;) {
		while (!e->stop && (!(e->cb || e->nls) || !e->n))
			pthread_cond_wait(&e->cond, &e->lock);
		if (e->stop)
			break;
		ev = e->q[e->head];
		e->head = (e->head + 1) % HCOMM_EVQ;
		e->n--;
		for (k = 0; k <= HCOMM_EV_LISTENERS && !e->stop; k++) {
			if (!k) {
				if (!e->cb)
					continue;
				cb = e->cb;
				cb_arg = e->arg;
				e->cur = HCOMM_EV_CUR_APP;
			} else {
				if (!e->ls[k - 1].id)
					continue;
				cb = e->ls[k - 1].cb;
				cb_arg = e->ls[k - 1].arg;
				e->cur = e->ls[k - 1].id;
			}
			pthread_mutex_unlock(&e->lock);
			cb(c, &ev, cb_arg);
			pthread_mutex_lock(&e->lock);
			e->cur = 0;
			pthread_cond_broadcast(&e->cond);
		}
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

/* Under e->lock: the delivery thread runs (0) or could not start. */
static int ev_thread_up(struct hcomm_comm *c, const char *who)
{
	struct hcomm_events *e = &c->ev;
	int ret;

	if (e->thr_up)
		return 0;
	ret = pthread_create(&e->thr, NULL, event_main, c);
	if (ret)
		return hcomm__fail(HCOMM_ERR_NOMEM, ret, "%s: pthread_create: "
				   "%s", who, strerror(ret));
	e->thr_up = 1;
	return 0;
}

/*
 * Under e->lock: wait until subscriber who (HCOMM_EV_CUR_APP or a
 * listener's id) is not being called, unless this thread is the caller.
 */
static void ev_quiesce(struct hcomm_events *e, int who)
{
	if (e->thr_up && !pthread_equal(pthread_self(), e->thr))
		while (e->cur == who)
			pthread_cond_wait(&e->cond, &e->lock);
}

HCOMM_EXPORT int hcomm_comm_set_event_cb(struct hcomm_comm *c,
					 hcomm_event_cb cb, void *arg)
{
	struct hcomm_events *e;
	int ret;

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
	if (cb) {
		ret = ev_thread_up(c, "hcomm_comm_set_event_cb");
		if (ret) {
			pthread_mutex_unlock(&e->lock);
			return ret;
		}
	}
	e->cb = cb;
	e->arg = arg;
	pthread_cond_broadcast(&e->cond);
	if (!cb)	/* off: no call of the old one after this returns */
		ev_quiesce(e, HCOMM_EV_CUR_APP);
	pthread_mutex_unlock(&e->lock);
	return 0;
}

HCOMM_EXPORT int hcomm_comm_event_listen(struct hcomm_comm *c,
					 hcomm_event_cb cb, void *arg)
{
	struct hcomm_events *e;
	int i, ret;

	if (!c || !cb)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_comm_event_listen: %s",
				   c ? "no callback" : "no communicator");
	e = &c->ev;
	pthread_mutex_lock(&e->lock);
	if (e->closed) {
		pthread_mutex_unlock(&e->lock);
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_comm_event_listen: the communicator "
				   "is being destroyed");
	}
	for (i = 0; i < HCOMM_EV_LISTENERS && e->ls[i].id; i++)
		;
	if (i == HCOMM_EV_LISTENERS) {
		pthread_mutex_unlock(&e->lock);
		return hcomm__fail(HCOMM_ERR_LIMIT, ENOSPC,
				   "hcomm_comm_event_listen: %d listeners "
				   "already", HCOMM_EV_LISTENERS);
	}
	ret = ev_thread_up(c, "hcomm_comm_event_listen");
	if (ret) {
		pthread_mutex_unlock(&e->lock);
		return ret;
	}
	if (++e->next_id <= 0)	/* ids stay positive, even after 2^31 */
		e->next_id = 1;
	e->ls[i].cb = cb;
	e->ls[i].arg = arg;
	e->ls[i].id = e->next_id;
	e->nls++;
	ret = e->next_id;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	return ret;
}

HCOMM_EXPORT int hcomm_comm_event_unlisten(struct hcomm_comm *c, int id)
{
	struct hcomm_events *e;
	int i;

	if (!c || id <= 0)
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_comm_event_unlisten: %s",
				   c ? "not a listener id" : "no communicator");
	e = &c->ev;
	pthread_mutex_lock(&e->lock);
	for (i = 0; i < HCOMM_EV_LISTENERS && e->ls[i].id != id; i++)
		;
	if (i == HCOMM_EV_LISTENERS) {
		pthread_mutex_unlock(&e->lock);
		return hcomm__fail(HCOMM_ERR_INVAL, EINVAL,
				   "hcomm_comm_event_unlisten: no listener %d",
				   id);
	}
	memset(&e->ls[i], 0, sizeof(e->ls[i]));
	e->nls--;
	ev_quiesce(e, id);
	pthread_mutex_unlock(&e->lock);
	return 0;
}
