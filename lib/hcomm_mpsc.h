/* SPDX-License-Identifier: MIT */
/*
 * libhcomm internals: a lock-free multi-producer single-consumer queue
 * (intrusive, Vyukov's algorithm, C11 atomics) and the event count its
 * consumer sleeps on (futex), used to hand completions to the callback
 * dispatcher without a lock.  Header-only: everything is static inline.
 *
 * push() is wait-free for producers; pop() is for the single consumer and
 * may return NULL while a push is half done (retry later: it is not empty).
 *
 *   void hcomm_mpsc_init(struct hcomm_mpsc *q);
 *   void hcomm_mpsc_push(struct hcomm_mpsc *q, struct hcomm_mpsc_node *n);
 *   struct hcomm_mpsc_node *hcomm_mpsc_pop(struct hcomm_mpsc *q);
 *   int hcomm_mpsc_empty(struct hcomm_mpsc *q);       (consumer only)
 *
 * Event count (consumer waits without missing a push):
 *   void hcomm_ec_init(struct hcomm_ec *ec);
 *   uint32_t hcomm_ec_prepare(struct hcomm_ec *ec);    (consumer, before
 *                                                       re-checking q)
 *   void hcomm_ec_wait(struct hcomm_ec *ec, uint32_t key, int timeout_ms);
 *   void hcomm_ec_notify(struct hcomm_ec *ec);         (producer, after
 *                                                       push; a syscall
 *                                                       only when the
 *                                                       consumer sleeps)
 */
#ifndef LIBHCOMM_MPSC_H
#define LIBHCOMM_MPSC_H

#endif /* LIBHCOMM_MPSC_H */
