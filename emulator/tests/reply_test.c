/*
 * reply_test.c - unit tests of the reply timing helpers (src/reply.c): the
 * quantile, the FUSE floor's in-band estimate, the reply time, the reply
 * thread's sleep-or-spin plan and its lead.  Pure functions, no daemon.
 * Prints one line per test and closes with "N passed, M failed".
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../src/reply.h"

static int g_fail;
#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			g_fail++;                                              \
			printf("    FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			printf(__VA_ARGS__);                                   \
			printf("\n");                                          \
		}                                                              \
	} while (0)

#define US 1000ull

static void test_quantile(void)
{
	CHECK(reply_quantile(NULL, 0, 0.5) == 0, "empty");
	uint64_t one[] = { 7 };
	CHECK(reply_quantile(one, 1, 0.5) == 7, "one sample");
	/* unsorted input, median of 5 (nearest rank) */
	uint64_t v[] = { 50, 10, 40, 20, 30 };
	CHECK(reply_quantile(v, 5, 0.5) == 30, "median %llu", (unsigned long long)v[2]);
	CHECK(v[0] == 10 && v[4] == 50, "sorted in place");
	CHECK(reply_quantile(v, 5, 0.0) == 10, "minimum");
	CHECK(reply_quantile(v, 5, 1.0) == 50, "maximum");
	CHECK(reply_quantile(v, 5, -1.0) == 10 && reply_quantile(v, 5, 2.0) == 50, "q clamped");
	/* a few very late round trips (a busy machine) do not move the median */
	uint64_t rt[1000];
	for (int i = 0; i < 1000; i++)
		rt[i] = (i % 10 == 0) ? 2000 * US : (20 + (uint64_t)(i % 7)) * US;
	uint64_t m = reply_quantile(rt, 1000, 0.5);
	CHECK(m >= 20 * US && m <= 26 * US, "median with 10 %% outliers %llu",
	      (unsigned long long)m);
}

static void test_floor_estimate(void)
{
	struct reply_floor_est e;
	reply_floor_init(&e, 50 * US);
	/* nothing until REPLY_FLOOR_EVERY samples */
	for (int i = 0; i < REPLY_FLOOR_EVERY - 1; i++)
		CHECK(reply_floor_sample(&e, 20 * US) == 0, "early sample %d", i);
	CHECK(e.value == 0, "no estimate yet");
	CHECK(reply_floor_sample(&e, 20 * US) == 1 && e.value == 20 * US, "first estimate %llu",
	      (unsigned long long)e.value);
	/* turnarounds above the cap are the client's idle time: rejected */
	for (int i = 0; i < 100; i++)
		reply_floor_sample(&e, 300 * US);
	CHECK(e.value == 20 * US && e.rejected == 100 && e.accepted == REPLY_FLOOR_EVERY,
	      "idle gaps rejected (value %llu, rejected %llu)", (unsigned long long)e.value,
	      (unsigned long long)e.rejected);
	/* the median of a window: a minority of slow turnarounds (a busy
	   machine) does not move it; a lasting change does, within a window */
	reply_floor_init(&e, 50 * US);
	for (int i = 0; i < 10 * REPLY_FLOOR_WINDOW; i++)
		reply_floor_sample(&e, (i % 4 == 0) ? 48 * US : (18 + (uint64_t)(i % 3)) * US);
	CHECK(e.value >= 18 * US && e.value <= 20 * US, "median with 25 %% slow samples %llu",
	      (unsigned long long)e.value);
	for (int i = 0; i < REPLY_FLOOR_WINDOW; i++)
		reply_floor_sample(&e, 30 * US);
	CHECK(e.value == 30 * US, "follows a change within one window %llu",
	      (unsigned long long)e.value);
	CHECK(e.value <= e.max_ns, "never above the cap");
	/* cap 0: every sample rejected, no floor */
	reply_floor_init(&e, 0);
	for (int i = 0; i < 100; i++)
		reply_floor_sample(&e, 1 * US);
	CHECK(e.value == 0 && e.accepted == 0, "cap 0: off");
}

static void test_floor_and_send_time(void)
{
	uint64_t arrival = 1000000 * US;
	uint64_t done = arrival + 82 * US; /* enterprise-tlc 4 KiB read */
	CHECK(reply_send_time(done, 25 * US, arrival) == arrival + 57 * US, "floor subtracted");
	CHECK(reply_send_time(done, 0, arrival) == done, "no floor: the model's time");
	/* the model's time shorter than the floor (an unmapped read: t_ctrl only):
	   sent at once, never before the request arrived */
	CHECK(reply_send_time(arrival + 20 * US, 25 * US, arrival) == arrival, "clamped to arrival");
	CHECK(reply_send_time(10, 25 * US, 0) == 0, "no underflow");
	/* a constant floor shifts every reply equally: the spacing of completions,
	   and so the model's throughput, is unchanged */
	uint64_t a = reply_send_time(done, 25 * US, arrival);
	uint64_t b = reply_send_time(done + 20 * US, 25 * US, arrival + 1 * US);
	CHECK(b - a == 20 * US, "spacing kept");
}

static void test_wait_plan(void)
{
	uint64_t w = 0, now = 1000 * US;
	/* spinning not allowed (many requests in flight): sleep to the deadline */
	CHECK(reply_wait_plan(now, now + 60 * US, 40 * US, 0, &w) == REPLY_SLEEP && w == now + 60 * US,
	      "no spin: sleep until due");
	CHECK(reply_wait_plan(now, now + 5 * US, 40 * US, 0, &w) == REPLY_SLEEP && w == now + 5 * US,
	      "no spin even when near");
	/* allowed: sleep until due - lead, spin within the lead */
	CHECK(reply_wait_plan(now, now + 60 * US, 40 * US, 1, &w) == REPLY_SLEEP && w == now + 20 * US,
	      "sleep until due - lead (%llu)", (unsigned long long)w);
	CHECK(reply_wait_plan(now, now + 40 * US, 40 * US, 1, &w) == REPLY_SPIN && w == now + 40 * US,
	      "spin at exactly the lead");
	CHECK(reply_wait_plan(now, now + 1 * US, 40 * US, 1, &w) == REPLY_SPIN, "spin when near");
	CHECK(reply_wait_plan(now, now, 40 * US, 1, &w) == REPLY_SPIN, "due now");
	CHECK(reply_wait_plan(now, now + 60 * US, 0, 1, &w) == REPLY_SLEEP && w == now + 60 * US,
	      "lead 0: plain sleep");
}

static void test_lead(void)
{
	/* twice the mean lateness plus the margin, capped by the window */
	CHECK(reply_lead(0, 10 * US, 100 * US) == 10 * US, "no lateness yet: the margin");
	CHECK(reply_lead(15 * US, 10 * US, 100 * US) == 40 * US, "2 x 15 + 10");
	CHECK(reply_lead(80 * US, 10 * US, 100 * US) == 100 * US, "capped at the window");
	CHECK(reply_lead(15 * US, 10 * US, 0) == 0, "window 0: never spin");
	/* the mean converges on a steady lateness and forgets an outlier */
	uint64_t e = 0;
	for (int i = 0; i < 200; i++)
		e = reply_late_update(e, 16 * US);
	CHECK(e > 15 * US && e <= 16 * US, "converged %llu", (unsigned long long)e);
	e = reply_late_update(e, 400 * US);
	CHECK(e < 70 * US, "one outlier moves it by 1/8: %llu", (unsigned long long)e);
	for (int i = 0; i < 40; i++)
		e = reply_late_update(e, 16 * US);
	CHECK(e < 17 * US, "forgotten %llu", (unsigned long long)e);
}

struct test {
	const char *name;
	void (*fn)(void);
};

int main(int argc, char **argv)
{
	static const struct test tests[] = {
		{ "quantile", test_quantile },
		{ "floor_estimate", test_floor_estimate },
		{ "floor_and_send_time", test_floor_and_send_time },
		{ "wait_plan", test_wait_plan },
		{ "lead", test_lead },
	};
	int passed = 0, failed = 0;
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (argc > 1 && !strstr(tests[i].name, argv[1]))
			continue;
		g_fail = 0;
		printf("%s\n", tests[i].name);
		tests[i].fn();
		if (g_fail) {
			failed++;
			printf("  FAILED %s\n", tests[i].name);
		} else {
			passed++;
			printf("  ok\n");
		}
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
