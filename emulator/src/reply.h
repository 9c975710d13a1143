/*
 * reply.h - pure helpers for when ssdlab-emu sends a reply (no I/O, threads
 * or clock reads; times are nanoseconds passed in).  Unit-tested by
 * tests/reply_test.c.  See emulator/README.md, "Reply timing".
 *
 *   - the FUSE floor: the time a request spends outside the daemon (the
 *     client's submission reaching a worker, the reply reaching the client),
 *     measured in band from the client's turnarounds at queue depth 1; a
 *     reply is sent that much before the model's completion time, so that
 *     the client sees the model's latency and not the model's plus the floor;
 *   - the reply thread's wait: sleep until shortly before the next deadline,
 *     then busy-wait, so that timer wake-up lateness does not add either.
 */
#ifndef SSDLAB_REPLY_H
#define SSDLAB_REPLY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The q-quantile (0 <= q <= 1, nearest rank, rounding down) of n samples;
 * sorts v in place.  0 when n is 0.
 */
uint64_t reply_quantile(uint64_t *v, size_t n, double q);

/*
 * The FUSE floor, estimated in band.  A sample is the time from a reply
 * leaving an otherwise idle daemon to the next request's arrival: for a
 * client that waits for each reply before it sends its next request (QD 1),
 * the reply's way back, the client's own turnaround and the request's way in.
 * Samples above max_ns are idle time of the client, not the floor, and are
 * rejected.  The estimate is the median of the last REPLY_FLOOR_WINDOW
 * accepted samples, recomputed every REPLY_FLOOR_EVERY; 0 until the first
 * REPLY_FLOOR_EVERY.  It is never above max_ns.
 */
#define REPLY_FLOOR_WINDOW 64
#define REPLY_FLOOR_EVERY 16

struct reply_floor_est {
	uint64_t max_ns;
	uint64_t ring[REPLY_FLOOR_WINDOW];
	unsigned n, pos, since;
	uint64_t accepted, rejected;
	uint64_t value;
};

void reply_floor_init(struct reply_floor_est *e, uint64_t max_ns);
/* add one sample; returns 1 when the estimate was recomputed */
int reply_floor_sample(struct reply_floor_est *e, uint64_t sample_ns);

/*
 * When the reply of a request that the model completes at done is sent:
 * done - floor, but never before the request arrived (arrival; the reply
 * then leaves at once).
 */
uint64_t reply_send_time(uint64_t done, uint64_t floor_ns, uint64_t arrival);

/*
 * The reply thread's next step when the earliest queued reply is due at due
 * (> now).  With spinning allowed (few requests in flight) and the deadline
 * at most lead away: REPLY_SPIN, busy-wait; otherwise REPLY_SLEEP until
 * *wake = due - lead (spinning allowed) or due.
 */
enum reply_wait { REPLY_SPIN, REPLY_SLEEP };
enum reply_wait reply_wait_plan(uint64_t now, uint64_t due, uint64_t lead, int spin_ok,
				uint64_t *wake);

/*
 * The lead the reply thread wakes early by: twice the mean timer lateness
 * plus margin_ns, at most window_ns.  late_ewma_ns is updated with one
 * observed lateness (an exponentially weighted mean, weight 1/8).
 */
uint64_t reply_lead(uint64_t late_ewma_ns, uint64_t margin_ns, uint64_t window_ns);
uint64_t reply_late_update(uint64_t late_ewma_ns, uint64_t late_ns);

#ifdef __cplusplus
}
#endif

#endif
