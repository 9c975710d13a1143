/*
 * reply.c - pure helpers for reply timing (see reply.h).
 */
#include "reply.h"

#include <stdlib.h>
#include <string.h>

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

uint64_t reply_quantile(uint64_t *v, size_t n, double q)
{
	if (!n)
		return 0;
	if (!(q > 0))
		q = 0;
	if (q > 1)
		q = 1;
	qsort(v, n, sizeof(*v), cmp_u64);
	size_t i = (size_t)(q * (double)(n - 1));
	return v[i];
}

void reply_floor_init(struct reply_floor_est *e, uint64_t max_ns)
{
	memset(e, 0, sizeof(*e));
	e->max_ns = max_ns;
}

int reply_floor_sample(struct reply_floor_est *e, uint64_t sample_ns)
{
	if (sample_ns > e->max_ns) {
		e->rejected++;
		return 0;
	}
	e->accepted++;
	e->ring[e->pos] = sample_ns;
	e->pos = (e->pos + 1) % REPLY_FLOOR_WINDOW;
	if (e->n < REPLY_FLOOR_WINDOW)
		e->n++;
	if (++e->since < REPLY_FLOOR_EVERY)
		return 0;
	e->since = 0;
	uint64_t v[REPLY_FLOOR_WINDOW];
	memcpy(v, e->ring, e->n * sizeof(v[0]));
	e->value = reply_quantile(v, e->n, 0.5);
	return 1;
}

uint64_t reply_send_time(uint64_t done, uint64_t floor_ns, uint64_t arrival)
{
	uint64_t t = done > floor_ns ? done - floor_ns : 0;
	return t > arrival ? t : arrival;
}

enum reply_wait reply_wait_plan(uint64_t now, uint64_t due, uint64_t lead, int spin_ok,
				uint64_t *wake)
{
	if (!spin_ok) {
		*wake = due;
		return REPLY_SLEEP;
	}
	if (due <= now || due - now <= lead) {
		*wake = due;
		return REPLY_SPIN;
	}
	*wake = due - lead;
	return REPLY_SLEEP;
}

uint64_t reply_lead(uint64_t late_ewma_ns, uint64_t margin_ns, uint64_t window_ns)
{
	uint64_t lead = 2 * late_ewma_ns + margin_ns;
	return lead < window_ns ? lead : window_ns;
}

uint64_t reply_late_update(uint64_t late_ewma_ns, uint64_t late_ns)
{
	return late_ewma_ns - late_ewma_ns / 8 + late_ns / 8;
}
