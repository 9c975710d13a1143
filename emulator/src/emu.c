/*
 * emu.c - ssdlab-emu: an emulated SSD served through FUSE.
 *
 * The mount point holds three files:
 *   disk     the device (user capacity), direct_io; read/write/fallocate
 *   stats    read-only, one JSON object of ground truth ("schema": 1)
 *   control  write-only, text commands (format, reset-stats, faults ...)
 *
 * Every disk request: lock, ask the FTL model (ftl.c) for the completion time
 * with arrival = CLOCK_MONOTONIC now, unlock, copy the data, reply at the
 * completion time minus the FUSE floor (the time a request spends outside
 * the daemon, measured from the client's turnarounds; reply.c).  See
 * emulator/README.md.
 */
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "ftl.h"
#include "reply.h"

#define EMU_VERSION "0.1.0"
#define STATS_SCHEMA 1

enum { INO_ROOT = 1, INO_DISK = 2, INO_STATS = 3, INO_CONTROL = 4 };

/* kernel ABI (include/uapi/linux/fuse.h) for the raw open reply */
struct raw_open_out {
	uint64_t fh;
	uint32_t open_flags;
	uint32_t padding;
};
#define RAW_FOPEN_DIRECT_IO (1u << 0)
#define RAW_FOPEN_PARALLEL_DIRECT_WRITES (1u << 6)

/* ------------------------------------------------------------------ */
/* faults */

#define MAX_RANGES 16
enum { F_READ = 1, F_WRITE = 2 };

struct range {
	uint64_t off, len;
	int ops; /* F_READ | F_WRITE */
};

struct faults {
	struct range eio[MAX_RANGES];
	int n_eio;
	struct range corrupt[MAX_RANGES];
	int n_corrupt;
	int64_t eio_after_writes;  /* -1: off */
	uint64_t writes_since_set;
	uint64_t spike_every;      /* 0: off */
	uint64_t spike_ms;
	bool vanished;
	int vanish_errno;
	/* counters */
	uint64_t eio_injected, corruptions_injected, spikes_injected;
};

/* ------------------------------------------------------------------ */
/* global state */

struct opts {
	const char *profile;
	const char *mountpoint;
	const char *backing;
	const char *pid_file;
	double time_scale;
	bool zero_latency;
	bool foreground;
	bool debug;
	bool allow_other;
	bool parallel_writes;
	unsigned max_threads;
	unsigned max_background;
	bool dump_config;
	bool sleep_replies;
	unsigned spin_max_inflight;
	uint64_t spin_window_ns;
	uint64_t reply_slack_ns;
	bool floor_auto;           /* measure the FUSE floor in band */
	uint64_t floor_fixed_ns;   /* the floor when not auto */
	uint64_t floor_max_ns;     /* cap of the measured floor */
};

static struct {
	struct opts o;
	struct ftl_config cfg;     /* requested (before time scale) */
	double lat_us[7];          /* unscaled latencies for the JSON */
	struct ftl *ftl;
	pthread_mutex_t lock;      /* FTL + faults + command state */
	struct faults flt;
	uint8_t *store;
	uint64_t size;             /* user bytes */
	int backing_fd;
	uint64_t start_ns;
	struct timespec start_wall;
	char last_cmd[256];
	bool last_cmd_ok;
	char last_cmd_err[256];
	uint64_t flush_cmds;
	atomic_uint_fast64_t io_seq;
	atomic_int inflight;
	atomic_int max_inflight;
	atomic_uint_fast64_t inflight_sum, inflight_samples;
	atomic_uint_fast64_t floor_ns;     /* subtracted from every reply time */
	atomic_uint_fast64_t replies, reply_late_sum_ns, reply_late_max_ns;
	pthread_t bg_thread;
	atomic_bool stop;
	struct fuse_session *se;
} G;

/*
 * The FUSE floor, measured in band: when a request arrives while nothing is
 * in flight, the time since the last reply began to be sent is the client's
 * turnaround (the reply's system call and its way to the client, the
 * client's own time, its next request's way to a worker and into the
 * daemon).  reply.c keeps the median of the recent ones.
 */
static struct {
	atomic_uint_fast64_t idle_at; /* the last reply (none other in flight) began; 0: busy */
	pthread_mutex_t mu;           /* the estimate */
	struct reply_floor_est est;
} FL = { .mu = PTHREAD_MUTEX_INITIALIZER };

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
	if (t <= mono_ns())
		return; /* vDSO clock read: no syscall when already due */
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000ull),
			       .tv_nsec = (long)(t % 1000000000ull) };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* ------------------------------------------------------------------ */
/* parsing helpers */

/* "4096", "4k", "1.5G", "64MiB", "512m" (binary multiples) */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -1;
	double mul = 1;
	switch (tolower((unsigned char)*end)) {
	case 'k': mul = 1024.0; end++; break;
	case 'm': mul = 1048576.0; end++; break;
	case 'g': mul = 1073741824.0; end++; break;
	case 't': mul = 1099511627776.0; end++; break;
	case 'b': case '\0': break;
	default: return -1;
	}
	if (mul > 1 && (*end == 'i' || *end == 'I'))
		end++;
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end)
		return -1;
	*out = (uint64_t)llround(v * mul);
	return 0;
}

static int parse_double(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end)
		return -1;
	*out = v;
	return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-')
		return -1;
	*out = v;
	return 0;
}

static int parse_onoff(const char *s, int *out)
{
	if (!strcmp(s, "on") || !strcmp(s, "1") || !strcmp(s, "true") || !strcmp(s, "yes"))
		*out = 1;
	else if (!strcmp(s, "off") || !strcmp(s, "0") || !strcmp(s, "false") || !strcmp(s, "no"))
		*out = 0;
	else
		return -1;
	return 0;
}

static int parse_ops(const char *s, int *ops)
{
	if (!s || !strcmp(s, "rw") || !strcmp(s, "any"))
		*ops = F_READ | F_WRITE;
	else if (!strcmp(s, "read") || !strcmp(s, "r"))
		*ops = F_READ;
	else if (!strcmp(s, "write") || !strcmp(s, "w"))
		*ops = F_WRITE;
	else
		return -1;
	return 0;
}

/* ------------------------------------------------------------------ */
/* profiles */

struct profile {
	const char *name;
	const char *desc;
	uint32_t channels, dies_per_channel;
	double op;
	double slc_frac;          /* SLC cache, fraction of user capacity */
	double slc_fold_mbs;      /* MiB/s folded when idle */
	enum ftl_gc_policy gc;
	double t_read_us, t_read_slc_us, t_prog_us, t_prog_slc_us, t_erase_us, t_xfer_us, t_ctrl_us;
	int idle_gc;
	double idle_threshold_ms, idle_gc_rate;
};

/*
 * Latencies are chosen so that the modelled devices stay well below the
 * emulator's own ceiling on a small VM (see README: ~90-120K 4 KiB IOPS with
 * --zero-latency on 2 vCPUs): t_ctrl = 20 us caps every profile at 50K
 * commands/s, and FOB random writes run at dies / t_prog.
 */
static const struct profile PROFILES[] = {
	/* 16 dies x 400 us program: FOB 4 KiB random write 40K IOPS; steady
	   state (WA ~7.5 at 7 % OP) ~3.5-4K IOPS; random read capped at 50K */
	{ "enterprise-tlc", "TLC, 16 dies, no SLC cache, 7 % OP, idle GC on",
	  4, 4, 0.07, 0.0, 0.0, FTL_GC_GREEDY,
	  60, 40, 400, 150, 3000, 2, 20, 1, 500, 100 },
	/* 8 dies; SLC program 180 us (44K IOPS, ~180 MB/s sequential) into a
	   cache of 12 % of capacity, then TLC direct at 900 us (~36 MB/s) */
	{ "client-slc", "TLC, 8 dies, SLC cache of 12 % of capacity, slow idle GC, 7 % OP",
	  4, 2, 0.07, 0.12, 32, FTL_GC_GREEDY,
	  70, 40, 900, 180, 3500, 2, 20, 1, 1000, 20 },
	/* enterprise-tlc with 28 % OP: WA ~2.5, steady state ~12K IOPS */
	{ "max-op", "enterprise-tlc with 28 % OP (MAX-class)",
	  4, 4, 0.28, 0.0, 0.0, FTL_GC_GREEDY,
	  60, 40, 400, 150, 3000, 2, 20, 1, 500, 100 },
};
#define NPROFILES (sizeof(PROFILES) / sizeof(PROFILES[0]))

static const struct profile *find_profile(const char *name)
{
	for (size_t i = 0; i < NPROFILES; i++)
		if (!strcmp(PROFILES[i].name, name))
			return &PROFILES[i];
	return NULL;
}

/* ------------------------------------------------------------------ */
/* JSON */

struct sbuf {
	char *p;
	size_t len, cap;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		size_t room = b->cap - b->len;
		int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (b->p && (size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		size_t ncap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
		char *np = realloc(b->p, ncap);
		if (!np)
			return;
		b->p = np;
		b->cap = ncap;
	}
}

static void sb_json_str(struct sbuf *b, const char *s)
{
	sb_printf(b, "\"");
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			sb_printf(b, "\\%c", c);
		else if (c < 0x20)
			sb_printf(b, "\\u%04x", c);
		else
			sb_printf(b, "%c", c);
	}
	sb_printf(b, "\"");
}

static double jnum(double v)
{
	return isfinite(v) ? v : -1.0;
}

static void ranges_json(struct sbuf *b, const struct range *r, int n)
{
	sb_printf(b, "[");
	for (int i = 0; i < n; i++)
		sb_printf(b, "%s{\"offset\": %" PRIu64 ", \"length\": %" PRIu64 ", \"ops\": \"%s\"}",
			  i ? ", " : "", r[i].off, r[i].len,
			  r[i].ops == F_READ ? "read" : r[i].ops == F_WRITE ? "write" : "rw");
	sb_printf(b, "]");
}

/* Build the stats JSON.  Caller must NOT hold G.lock. */
static char *stats_json(size_t *len)
{
	struct ftl_stats st;
	struct faults fl;
	char last_cmd[256], last_err[256];
	bool last_ok;
	uint64_t flushes;
	pthread_mutex_lock(&G.lock);
	ftl_idle(G.ftl, mono_ns());
	ftl_stats(G.ftl, &st);
	fl = G.flt;
	memcpy(last_cmd, G.last_cmd, sizeof(last_cmd));
	memcpy(last_err, G.last_cmd_err, sizeof(last_err));
	last_ok = G.last_cmd_ok;
	flushes = G.flush_cmds;
	pthread_mutex_unlock(&G.lock);

	const struct ftl_config *c = ftl_get_config(G.ftl);
	const struct ftl_geometry *g = ftl_get_geometry(G.ftl);
	uint64_t samples = atomic_load(&G.inflight_samples);
	double mean_qd = samples ? (double)atomic_load(&G.inflight_sum) / (double)samples : 0.0;
	uint64_t now = mono_ns();

	struct sbuf b = { 0 };
	sb_printf(&b, "{\n  \"schema\": %d,\n  \"emulator\": \"ssdlab-emu\",\n", STATS_SCHEMA);
	sb_printf(&b, "  \"version\": \"%s\",\n  \"profile\": ", EMU_VERSION);
	sb_json_str(&b, G.o.profile);
	sb_printf(&b, ",\n  \"pid\": %d,\n  \"mountpoint\": ", (int)getpid());
	sb_json_str(&b, G.o.mountpoint ? G.o.mountpoint : "");
	sb_printf(&b, ",\n  \"uptime_s\": %.3f,\n  \"monotonic_ns\": %" PRIu64 ",\n",
		  (double)(now - G.start_ns) / 1e9, now);

	sb_printf(&b, "  \"config\": {\n");
	sb_printf(&b, "    \"user_bytes\": %" PRIu64 ",\n", g->user_bytes);
	sb_printf(&b, "    \"physical_bytes\": %" PRIu64 ",\n", g->phys_bytes);
	sb_printf(&b, "    \"page_size\": %u,\n", c->page_size);
	sb_printf(&b, "    \"channels\": %u,\n", c->channels);
	sb_printf(&b, "    \"dies_per_channel\": %u,\n", c->dies_per_channel);
	sb_printf(&b, "    \"dies\": %u,\n", g->ndies);
	sb_printf(&b, "    \"blocks_per_die\": %u,\n", c->blocks_per_die);
	sb_printf(&b, "    \"pages_per_block\": %u,\n", c->pages_per_block);
	sb_printf(&b, "    \"block_bytes\": %" PRIu64 ",\n",
		  (uint64_t)c->pages_per_block * c->page_size);
	sb_printf(&b, "    \"total_blocks\": %" PRIu64 ",\n", g->total_blocks);
	sb_printf(&b, "    \"op\": %.6g,\n", c->op);
	sb_printf(&b, "    \"effective_op\": %.6f,\n", g->effective_op);
	sb_printf(&b, "    \"gc_policy\": \"%s\",\n",
		  c->gc_policy == FTL_GC_GREEDY ? "greedy" : "cost-benefit");
	sb_printf(&b, "    \"gc_low_wm\": %u,\n", c->gc_low_wm);
	sb_printf(&b, "    \"slc_bytes\": %" PRIu64 ",\n", c->slc_bytes);
	sb_printf(&b, "    \"slc_fold_rate_bytes_per_s\": %" PRIu64 ",\n", c->slc_fold_rate);
	sb_printf(&b, "    \"t_read_us\": %.3f,\n", G.lat_us[0]);
	sb_printf(&b, "    \"t_read_slc_us\": %.3f,\n", G.lat_us[1]);
	sb_printf(&b, "    \"t_prog_us\": %.3f,\n", G.lat_us[2]);
	sb_printf(&b, "    \"t_prog_slc_us\": %.3f,\n", G.lat_us[3]);
	sb_printf(&b, "    \"t_erase_us\": %.3f,\n", G.lat_us[4]);
	sb_printf(&b, "    \"t_xfer_us\": %.3f,\n", G.lat_us[5]);
	sb_printf(&b, "    \"ctrl_overhead_us\": %.3f,\n", G.lat_us[6]);
	sb_printf(&b, "    \"time_scale\": %.6g,\n", G.o.time_scale);
	sb_printf(&b, "    \"zero_latency\": %s,\n", G.o.zero_latency ? "true" : "false");
	sb_printf(&b, "    \"idle_gc\": %s,\n", c->idle_gc ? "true" : "false");
	sb_printf(&b, "    \"idle_threshold_ms\": %.3f,\n", (double)c->idle_threshold_ns / 1e6);
	sb_printf(&b, "    \"idle_gc_rate_blocks_per_s\": %.6g,\n", c->idle_gc_rate);
	sb_printf(&b, "    \"idle_gc_target_free_blocks_per_die\": %u,\n", c->idle_gc_target);
	sb_printf(&b, "    \"backing\": ");
	sb_json_str(&b, G.o.backing ? G.o.backing : "ram");
	sb_printf(&b, ",\n    \"max_threads\": %u,\n", G.o.max_threads);
	sb_printf(&b, "    \"max_background\": %u,\n", G.o.max_background);
	sb_printf(&b, "    \"reply_mode\": \"%s\",\n", G.o.sleep_replies ? "sleep" : "queue");
	sb_printf(&b, "    \"reply_slack_us\": %.3f,\n", (double)G.o.reply_slack_ns / 1e3);
	sb_printf(&b, "    \"spin_max_inflight\": %u,\n", G.o.spin_max_inflight);
	sb_printf(&b, "    \"spin_window_us\": %.3f,\n", (double)G.o.spin_window_ns / 1e3);
	sb_printf(&b, "    \"fuse_floor\": \"%s\",\n", G.o.floor_auto ? "auto" : "fixed");
	sb_printf(&b, "    \"fuse_floor_max_us\": %.3f\n  },\n", (double)G.o.floor_max_ns / 1e3);

	sb_printf(&b, "  \"counters\": {\n");
	sb_printf(&b, "    \"host_write_bytes\": %" PRIu64 ",\n", st.host_write_bytes);
	sb_printf(&b, "    \"host_read_bytes\": %" PRIu64 ",\n", st.host_read_bytes);
	sb_printf(&b, "    \"host_write_cmds\": %" PRIu64 ",\n", st.host_write_cmds);
	sb_printf(&b, "    \"host_read_cmds\": %" PRIu64 ",\n", st.host_read_cmds);
	sb_printf(&b, "    \"host_trim_cmds\": %" PRIu64 ",\n", st.host_trim_cmds);
	sb_printf(&b, "    \"host_flush_cmds\": %" PRIu64 ",\n", flushes);
	sb_printf(&b, "    \"trimmed_bytes\": %" PRIu64 ",\n", st.trimmed_bytes);
	sb_printf(&b, "    \"host_prog_pages\": %" PRIu64 ",\n", st.host_prog_pages);
	sb_printf(&b, "    \"nand_write_bytes\": %" PRIu64 ",\n", st.nand_write_bytes);
	sb_printf(&b, "    \"nand_prog_pages\": %" PRIu64 ",\n", st.nand_prog_pages);
	sb_printf(&b, "    \"nand_prog_pages_slc\": %" PRIu64 ",\n", st.nand_prog_pages_slc);
	sb_printf(&b, "    \"nand_prog_pages_tlc\": %" PRIu64 ",\n", st.nand_prog_pages_tlc);
	sb_printf(&b, "    \"nand_read_pages\": %" PRIu64 ",\n", st.nand_read_pages);
	sb_printf(&b, "    \"write_amplification\": %.6f,\n", st.write_amplification);
	sb_printf(&b, "    \"gc_invocations\": %" PRIu64 ",\n", st.gc_invocations);
	sb_printf(&b, "    \"gc_fg_blocks\": %" PRIu64 ",\n", st.gc_fg_blocks);
	sb_printf(&b, "    \"gc_bg_blocks\": %" PRIu64 ",\n", st.gc_bg_blocks);
	sb_printf(&b, "    \"gc_emergency\": %" PRIu64 ",\n", st.gc_emergency);
	/* ground truth of "GC started" (null until the first foreground victim
	   since the last format/sanitize or reset-stats); ns since daemon start */
	if (st.gc_started)
		sb_printf(&b, "    \"gc_start_host_write_bytes\": %" PRIu64 ",\n"
			  "    \"gc_start_ns\": %" PRIu64 ",\n",
			  st.gc_start_host_write_bytes,
			  st.gc_start_ns > G.start_ns ? st.gc_start_ns - G.start_ns : 0);
	else
		sb_printf(&b, "    \"gc_start_host_write_bytes\": null,\n"
			  "    \"gc_start_ns\": null,\n");
	sb_printf(&b, "    \"pages_relocated\": %" PRIu64 ",\n", st.pages_relocated);
	sb_printf(&b, "    \"blocks_erased\": %" PRIu64 ",\n", st.blocks_erased);
	sb_printf(&b, "    \"slc_fold_pages\": %" PRIu64 ",\n", st.slc_fold_pages);
	sb_printf(&b, "    \"formats\": %" PRIu64 ",\n", st.formats);
	sb_printf(&b, "    \"max_inflight\": %d,\n", atomic_load(&G.max_inflight));
	sb_printf(&b, "    \"mean_inflight_at_arrival\": %.3f,\n", mean_qd);
	uint64_t nrep = atomic_load(&G.replies);
	sb_printf(&b, "    \"replies\": %" PRIu64 ",\n", nrep);
	sb_printf(&b, "    \"reply_late_us_mean\": %.3f,\n",
		  nrep ? (double)atomic_load(&G.reply_late_sum_ns) / (double)nrep / 1e3 : 0.0);
	sb_printf(&b, "    \"reply_late_us_max\": %.3f\n  },\n",
		  (double)atomic_load(&G.reply_late_max_ns) / 1e3);

	sb_printf(&b, "  \"state\": {\n");
	sb_printf(&b, "    \"free_blocks\": %" PRIu64 ",\n", st.free_blocks);
	sb_printf(&b, "    \"total_blocks\": %" PRIu64 ",\n", st.total_blocks);
	sb_printf(&b, "    \"valid_pages\": %" PRIu64 ",\n", st.valid_pages);
	sb_printf(&b, "    \"mapped_bytes\": %" PRIu64 ",\n", st.valid_pages * c->page_size);
	sb_printf(&b, "    \"slc_used_bytes\": %" PRIu64 ",\n", st.slc_used_bytes);
	sb_printf(&b, "    \"slc_valid_bytes\": %" PRIu64 ",\n", st.slc_valid_bytes);
	sb_printf(&b, "    \"slc_capacity_bytes\": %" PRIu64 ",\n", st.slc_capacity_bytes);
	sb_printf(&b, "    \"idle_gc\": %s,\n", st.idle_gc ? "true" : "false");
	sb_printf(&b, "    \"inflight\": %d,\n", atomic_load(&G.inflight));
	pthread_mutex_lock(&FL.mu);
	uint64_t fl_acc = FL.est.accepted, fl_rej = FL.est.rejected;
	pthread_mutex_unlock(&FL.mu);
	sb_printf(&b, "    \"fuse_floor_us\": %.3f,\n", (double)atomic_load(&G.floor_ns) / 1e3);
	sb_printf(&b, "    \"fuse_floor_samples\": %" PRIu64 ",\n", fl_acc);
	sb_printf(&b, "    \"fuse_floor_rejected\": %" PRIu64 ",\n", fl_rej);
	sb_printf(&b, "    \"die_busy_ahead_us\": %.1f\n  },\n",
		  st.max_die_busy_ns > now ? (double)(st.max_die_busy_ns - now) / 1e3 : 0.0);

	sb_printf(&b, "  \"wear\": {\n");
	sb_printf(&b, "    \"lifetime_erases\": %" PRIu64 ",\n", st.lifetime_erases);
	sb_printf(&b, "    \"erase_count_min\": %u,\n", st.erase_count_min);
	sb_printf(&b, "    \"erase_count_max\": %u,\n", st.erase_count_max);
	sb_printf(&b, "    \"erase_count_mean\": %.4f,\n", st.erase_count_mean);
	sb_printf(&b, "    \"lifetime_host_write_bytes\": %" PRIu64 ",\n",
		  st.lifetime_host_write_bytes);
	sb_printf(&b, "    \"lifetime_nand_write_bytes\": %" PRIu64 ",\n",
		  st.lifetime_nand_write_bytes);
	/* as an NVMe drive's SMART / Health log reports host writes: units of
	   1000 x 512 bytes, rounded up (NVMe base specification, Data Units Written) */
	sb_printf(&b, "    \"data_units_written\": %" PRIu64 "\n  },\n",
		  (st.lifetime_host_write_bytes + 511999) / 512000);

	sb_printf(&b, "  \"model\": {\n");
	sb_printf(&b, "    \"analytic_wa_nominal_op\": %.4f,\n",
		  jnum(ftl_analytic_wa(1.0 + g->effective_op)));
	sb_printf(&b, "    \"alpha_design\": %.6f,\n", g->alpha_eff);
	sb_printf(&b, "    \"analytic_wa_design\": %.4f,\n", jnum(g->analytic_wa));
	sb_printf(&b, "    \"alpha_measured\": %.6f,\n", st.alpha_measured);
	sb_printf(&b, "    \"analytic_wa_measured\": %.4f,\n", jnum(st.analytic_wa_measured));
	sb_printf(&b, "    \"avg_erased_pages\": %.1f,\n", st.avg_erased_pages);
	sb_printf(&b, "    \"avg_valid_pages\": %.1f\n  },\n", st.avg_valid_pages);

	sb_printf(&b, "  \"faults\": {\n    \"vanished\": %s,\n", fl.vanished ? "true" : "false");
	sb_printf(&b, "    \"vanish_errno\": \"%s\",\n", fl.vanish_errno == ENODEV ? "ENODEV" : "EIO");
	sb_printf(&b, "    \"eio_ranges\": ");
	ranges_json(&b, fl.eio, fl.n_eio);
	sb_printf(&b, ",\n    \"eio_after_writes\": ");
	if (fl.eio_after_writes < 0)
		sb_printf(&b, "null");
	else
		sb_printf(&b, "%" PRId64, fl.eio_after_writes);
	sb_printf(&b, ",\n    \"writes_since_eio_after_set\": %" PRIu64 ",\n", fl.writes_since_set);
	sb_printf(&b, "    \"latency_spike_every\": %" PRIu64 ",\n", fl.spike_every);
	sb_printf(&b, "    \"latency_spike_ms\": %" PRIu64 ",\n", fl.spike_ms);
	sb_printf(&b, "    \"corrupt_ranges\": ");
	ranges_json(&b, fl.corrupt, fl.n_corrupt);
	sb_printf(&b, ",\n    \"eio_injected\": %" PRIu64 ",\n", fl.eio_injected);
	sb_printf(&b, "    \"corruptions_injected\": %" PRIu64 ",\n", fl.corruptions_injected);
	sb_printf(&b, "    \"latency_spikes_injected\": %" PRIu64 "\n  },\n", fl.spikes_injected);

	sb_printf(&b, "  \"last_command\": ");
	sb_json_str(&b, last_cmd);
	sb_printf(&b, ",\n  \"last_command_ok\": %s,\n  \"last_command_error\": ",
		  last_ok ? "true" : "false");
	sb_json_str(&b, last_err);
	sb_printf(&b, "\n}\n");
	*len = b.len;
	return b.p;
}

/* ------------------------------------------------------------------ */
/* data store */

static void store_zero(uint64_t off, uint64_t len)
{
	/* zero [off, off+len): whole system pages are released, edges memset */
	long sp = sysconf(_SC_PAGESIZE);
	uint64_t a = (off + (uint64_t)sp - 1) / (uint64_t)sp * (uint64_t)sp;
	uint64_t e = (off + len) / (uint64_t)sp * (uint64_t)sp;
	if (a >= e) {
		memset(G.store + off, 0, len);
		return;
	}
	if (a > off)
		memset(G.store + off, 0, a - off);
	if (off + len > e)
		memset(G.store + e, 0, off + len - e);
	if (G.backing_fd >= 0) {
		if (fallocate(G.backing_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)a,
			      (off_t)(e - a)) != 0)
			memset(G.store + a, 0, e - a);
	} else if (madvise(G.store + a, e - a, MADV_DONTNEED) != 0) {
		memset(G.store + a, 0, e - a);
	}
}

static int store_open(void)
{
	G.backing_fd = -1;
	if (G.o.backing) {
		int fd = open(G.o.backing, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			fprintf(stderr, "ssdlab-emu: %s: %s\n", G.o.backing, strerror(errno));
			return -1;
		}
		/* always start fresh-out-of-box: the model has nothing mapped */
		if (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t)G.size) != 0) {
			fprintf(stderr, "ssdlab-emu: %s: truncate: %s\n", G.o.backing, strerror(errno));
			close(fd);
			return -1;
		}
		G.store = mmap(NULL, G.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		G.backing_fd = fd;
	} else {
		G.store = mmap(NULL, G.size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	}
	if (G.store == MAP_FAILED) {
		fprintf(stderr, "ssdlab-emu: mmap %" PRIu64 " bytes: %s\n", G.size, strerror(errno));
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* control commands */

static int add_range(struct range *arr, int *n, uint64_t off, uint64_t len, int ops,
		     char *err, size_t errlen)
{
	if (*n >= MAX_RANGES) {
		snprintf(err, errlen, "too many ranges (max %d)", MAX_RANGES);
		return -1;
	}
	if (len == 0 || off >= G.size) {
		snprintf(err, errlen, "range outside the device");
		return -1;
	}
	arr[*n].off = off;
	arr[*n].len = len;
	arr[*n].ops = ops;
	(*n)++;
	return 0;
}

/* Execute one command line; G.lock must be held.  Returns 0 or -errno. */
static int run_command_locked(char *line, char *err, size_t errlen)
{
	char *argv[8];
	int argc = 0;
	for (char *tok = strtok(line, " \t\r\n"); tok && argc < 8; tok = strtok(NULL, " \t\r\n"))
		argv[argc++] = tok;
	if (argc == 0)
		return 0;
	uint64_t now = mono_ns();
	if ((!strcmp(argv[0], "format") || !strcmp(argv[0], "sanitize")) && argc == 1) {
		ftl_format(G.ftl, now);
		store_zero(0, G.size);
		return 0;
	}
	if (!strcmp(argv[0], "reset-stats") && argc == 1) {
		ftl_reset_stats(G.ftl);
		G.flush_cmds = 0;
		atomic_store(&G.max_inflight, 0);
		atomic_store(&G.inflight_sum, 0);
		atomic_store(&G.inflight_samples, 0);
		atomic_store(&G.replies, 0);
		atomic_store(&G.reply_late_sum_ns, 0);
		atomic_store(&G.reply_late_max_ns, 0);
		G.flt.eio_injected = G.flt.corruptions_injected = G.flt.spikes_injected = 0;
		return 0;
	}
	if (!strcmp(argv[0], "idle-gc") && argc == 2) {
		int on;
		if (parse_onoff(argv[1], &on)) {
			snprintf(err, errlen, "idle-gc takes on|off");
			return -EINVAL;
		}
		ftl_set_idle_gc(G.ftl, on);
		return 0;
	}
	if (!strcmp(argv[0], "fault") && argc >= 2) {
		const char *k = argv[1];
		uint64_t a, b;
		if (!strcmp(k, "eio-range") && (argc == 4 || argc == 5)) {
			int ops;
			if (parse_size(argv[2], &a) || parse_size(argv[3], &b) ||
			    parse_ops(argc == 5 ? argv[4] : NULL, &ops)) {
				snprintf(err, errlen, "usage: fault eio-range OFFSET LENGTH [read|write|rw]");
				return -EINVAL;
			}
			return add_range(G.flt.eio, &G.flt.n_eio, a, b, ops, err, errlen) ? -EINVAL : 0;
		}
		if (!strcmp(k, "corrupt-range") && argc == 4) {
			if (parse_size(argv[2], &a) || parse_size(argv[3], &b)) {
				snprintf(err, errlen, "usage: fault corrupt-range OFFSET LENGTH");
				return -EINVAL;
			}
			return add_range(G.flt.corrupt, &G.flt.n_corrupt, a, b, F_READ, err, errlen)
				? -EINVAL : 0;
		}
		if (!strcmp(k, "eio-after-writes") && argc == 3) {
			if (parse_u64(argv[2], &a)) {
				snprintf(err, errlen, "usage: fault eio-after-writes N");
				return -EINVAL;
			}
			G.flt.eio_after_writes = (int64_t)a;
			G.flt.writes_since_set = 0;
			return 0;
		}
		if (!strcmp(k, "latency-spike") && argc == 4) {
			if (parse_u64(argv[2], &a) || parse_u64(argv[3], &b) || a == 0) {
				snprintf(err, errlen, "usage: fault latency-spike EVERY_N_IOS DELAY_MS");
				return -EINVAL;
			}
			G.flt.spike_every = a;
			G.flt.spike_ms = b;
			return 0;
		}
		if (!strcmp(k, "vanish") && (argc == 2 || argc == 3)) {
			int e = ENODEV;
			if (argc == 3) {
				if (!strcasecmp(argv[2], "eio"))
					e = EIO;
				else if (strcasecmp(argv[2], "enodev")) {
					snprintf(err, errlen, "usage: fault vanish [enodev|eio]");
					return -EINVAL;
				}
			}
			G.flt.vanished = true;
			G.flt.vanish_errno = e;
			return 0;
		}
		if (!strcmp(k, "clear") && (argc == 2 || argc == 3)) {
			const char *w = argc == 3 ? argv[2] : "all";
			bool all = !strcmp(w, "all"), hit = all;
			if (all || !strcmp(w, "eio-range")) { G.flt.n_eio = 0; hit = true; }
			if (all || !strcmp(w, "corrupt-range")) { G.flt.n_corrupt = 0; hit = true; }
			if (all || !strcmp(w, "eio-after-writes")) {
				G.flt.eio_after_writes = -1;
				G.flt.writes_since_set = 0;
				hit = true;
			}
			if (all || !strcmp(w, "latency-spike")) { G.flt.spike_every = 0; hit = true; }
			if (all || !strcmp(w, "vanish")) { G.flt.vanished = false; hit = true; }
			if (!hit) {
				snprintf(err, errlen, "unknown fault kind '%s'", w);
				return -EINVAL;
			}
			return 0;
		}
	}
	snprintf(err, errlen, "unknown command");
	return -EINVAL;
}

static int run_commands(const char *buf, size_t len)
{
	char *copy = strndup(buf, len);
	if (!copy)
		return -ENOMEM;
	int rc = 0;
	char *save = NULL;
	pthread_mutex_lock(&G.lock);
	for (char *line = strtok_r(copy, "\n;", &save); line; line = strtok_r(NULL, "\n;", &save)) {
		char shown[256], err[256] = "";
		snprintf(shown, sizeof(shown), "%s", line);
		/* trim for display */
		size_t n = strlen(shown);
		while (n && isspace((unsigned char)shown[n - 1]))
			shown[--n] = 0;
		char *s = shown;
		while (isspace((unsigned char)*s))
			s++;
		if (!*s)
			continue;
		int r = run_command_locked(line, err, sizeof(err));
		snprintf(G.last_cmd, sizeof(G.last_cmd), "%s", s);
		G.last_cmd_ok = r == 0;
		snprintf(G.last_cmd_err, sizeof(G.last_cmd_err), "%s", r ? err : "");
		if (r) {
			rc = r;
			break;
		}
	}
	pthread_mutex_unlock(&G.lock);
	free(copy);
	return rc;
}

/* ------------------------------------------------------------------ */
/* FUSE operations */

static const double ATTR_TIMEOUT = 1.0;

static void fill_attr(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_blksize = 4096;
	st->st_mtim = st->st_ctim = st->st_atim = G.start_wall;
	switch (ino) {
	case INO_ROOT:
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		break;
	case INO_DISK: {
		st->st_mode = S_IFREG | 0644;
		st->st_nlink = 1;
		st->st_size = (off_t)G.size;
		struct ftl_stats s;
		pthread_mutex_lock(&G.lock);
		ftl_stats(G.ftl, &s);
		pthread_mutex_unlock(&G.lock);
		st->st_blocks = (blkcnt_t)(s.valid_pages * ftl_get_config(G.ftl)->page_size / 512);
		break;
	}
	case INO_STATS:
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = 0;
		break;
	case INO_CONTROL:
		st->st_mode = S_IFREG | 0200;
		st->st_nlink = 1;
		st->st_size = 0;
		break;
	}
}

static fuse_ino_t name_ino(const char *name)
{
	if (!strcmp(name, "disk"))
		return INO_DISK;
	if (!strcmp(name, "stats"))
		return INO_STATS;
	if (!strcmp(name, "control"))
		return INO_CONTROL;
	return 0;
}

static void op_init(void *ud, struct fuse_conn_info *conn)
{
	(void)ud;
	conn->max_background = G.o.max_background;
	conn->congestion_threshold = G.o.max_background * 3 / 4;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_ino_t ino = parent == INO_ROOT ? name_ino(name) : 0;
	if (!ino) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.ino = ino;
	e.generation = 1;
	e.attr_timeout = ATTR_TIMEOUT;
	e.entry_timeout = ATTR_TIMEOUT;
	fill_attr(ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	if (ino < INO_ROOT || ino > INO_CONTROL) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct stat st;
	fill_attr(ino, &st);
	fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	(void)fi;
	if (ino < INO_ROOT || ino > INO_CONTROL) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		/* the device has a fixed size; truncating control/stats is a no-op */
		if (ino == INO_DISK && (uint64_t)attr->st_size != G.size) {
			fuse_reply_err(req, EPERM);
			return;
		}
		if (ino == INO_ROOT) {
			fuse_reply_err(req, EISDIR);
			return;
		}
	}
	struct stat st;
	fill_attr(ino, &st);
	fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	if (ino != INO_ROOT) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	static const struct {
		const char *name;
		fuse_ino_t ino;
		mode_t mode;
	} ents[] = { { ".", INO_ROOT, S_IFDIR }, { "..", INO_ROOT, S_IFDIR },
		     { "disk", INO_DISK, S_IFREG }, { "stats", INO_STATS, S_IFREG },
		     { "control", INO_CONTROL, S_IFREG } };
	char buf[1024];
	size_t used = 0;
	if (size > sizeof(buf))
		size = sizeof(buf);
	for (off_t i = off; i < (off_t)(sizeof(ents) / sizeof(ents[0])); i++) {
		struct stat st = { .st_ino = ents[i].ino, .st_mode = ents[i].mode };
		size_t need = fuse_add_direntry(req, buf + used, size - used, ents[i].name, &st, i + 1);
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
}

struct stats_fh {
	pthread_mutex_t mu;
	char *buf;
	size_t len;
};

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int acc = fi->flags & O_ACCMODE;
	switch (ino) {
	case INO_DISK: {
		pthread_mutex_lock(&G.lock);
		bool gone = G.flt.vanished;
		int e = G.flt.vanish_errno;
		pthread_mutex_unlock(&G.lock);
		if (gone) {
			fuse_reply_err(req, e);
			return;
		}
		if (G.o.parallel_writes) {
			/* libfuse 3.14 cannot express FOPEN_PARALLEL_DIRECT_WRITES
			   (kernel >= 6.2: concurrent O_DIRECT writes to one inode);
			   send the open reply by hand.  Unknown flags are ignored by
			   older kernels. */
			struct raw_open_out o = { 0, RAW_FOPEN_DIRECT_IO |
						     RAW_FOPEN_PARALLEL_DIRECT_WRITES, 0 };
			fuse_reply_buf(req, (const char *)&o, sizeof(o));
			return;
		}
		fi->direct_io = 1;
		fi->keep_cache = 0;
		fuse_reply_open(req, fi);
		return;
	}
	case INO_STATS: {
		if (acc != O_RDONLY) {
			fuse_reply_err(req, EACCES);
			return;
		}
		struct stats_fh *h = calloc(1, sizeof(*h));
		if (!h) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		pthread_mutex_init(&h->mu, NULL);
		fi->fh = (uint64_t)(uintptr_t)h;
		fi->direct_io = 1;
		fi->nonseekable = 0;
		fuse_reply_open(req, fi);
		return;
	}
	case INO_CONTROL:
		if (acc == O_RDONLY) {
			fuse_reply_err(req, EACCES);
			return;
		}
		fi->direct_io = 1;
		fuse_reply_open(req, fi);
		return;
	default:
		fuse_reply_err(req, ino == INO_ROOT ? EISDIR : ENOENT);
	}
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino == INO_STATS && fi->fh) {
		struct stats_fh *h = (struct stats_fh *)(uintptr_t)fi->fh;
		free(h->buf);
		pthread_mutex_destroy(&h->mu);
		free(h);
	}
	fuse_reply_err(req, 0);
}

/* a disk request arrived at now */
static void io_begin(uint64_t now)
{
	int n = atomic_fetch_add(&G.inflight, 1) + 1;
	int m = atomic_load(&G.max_inflight);
	while (n > m && !atomic_compare_exchange_weak(&G.max_inflight, &m, n))
		;
	atomic_fetch_add(&G.inflight_sum, (uint64_t)n);
	atomic_fetch_add(&G.inflight_samples, 1);
	if (n == 1 && G.o.floor_auto) {
		/* the daemon was idle: the time since the last reply began is
		   the client's turnaround, one sample of the floor */
		uint64_t t = atomic_exchange(&FL.idle_at, 0);
		if (t && now > t) {
			pthread_mutex_lock(&FL.mu);
			if (reply_floor_sample(&FL.est, now - t))
				atomic_store(&G.floor_ns, FL.est.value);
			pthread_mutex_unlock(&FL.mu);
		}
	}
}

/* returns the requests still in flight */
static int io_end(void)
{
	return atomic_fetch_sub(&G.inflight, 1) - 1;
}

/*
 * The reply of the last request in flight has just left; its sending
 * started at t (the turnaround includes the reply's own system call: the
 * client does not see the reply before it is done).
 */
static void io_idle(uint64_t t)
{
	if (!G.o.floor_auto || atomic_load(&G.inflight) != 0)
		return;
	atomic_store(&FL.idle_at, t);
	/* a request that arrived meanwhile may have found no sample: then
	   this one must not stay for a later arrival (it would be stale) */
	uint_fast64_t mine = t;
	if (atomic_load(&G.inflight) != 0)
		atomic_compare_exchange_strong(&FL.idle_at, &mine, 0);
}

static bool overlaps(const struct range *r, uint64_t off, uint64_t len)
{
	return off < r->off + r->len && r->off < off + len;
}

/*
 * Fault checks shared by reads and writes (G.lock held).  Returns 0 or an
 * errno to fail the request with; *spike_ns gets extra latency.
 */
static int fault_check_locked(int op, uint64_t off, uint64_t len, uint64_t *spike_ns)
{
	struct faults *f = &G.flt;
	if (f->vanished)
		return f->vanish_errno;
	for (int i = 0; i < f->n_eio; i++)
		if ((f->eio[i].ops & op) && overlaps(&f->eio[i], off, len)) {
			f->eio_injected++;
			return EIO;
		}
	if (op == F_WRITE && f->eio_after_writes >= 0) {
		if (f->writes_since_set >= (uint64_t)f->eio_after_writes) {
			f->eio_injected++;
			return EIO;
		}
		f->writes_since_set++;
	}
	*spike_ns = 0;
	if (f->spike_every) {
		uint64_t n = atomic_fetch_add(&G.io_seq, 1) + 1;
		if (n % f->spike_every == 0) {
			*spike_ns = f->spike_ms * 1000000ull;
			f->spikes_injected++;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/*
 * Delayed replies.  A request's reply must leave at its modelled completion
 * time minus the FUSE floor (the time the request spends outside the
 * daemon, so that the client sees the modelled latency; reply.c).
 * Default: the worker queues it in a min-heap and goes back to /dev/fuse at
 * once; one reply thread sleeps (clock_nanosleep-precise
 * pthread_cond_timedwait on CLOCK_MONOTONIC) until the earliest deadline
 * and sends every due reply.  While few requests are in flight
 * (--spin-max-inflight) it wakes early by a lead of twice its measured
 * timer lateness (at most --spin-window-us) and busy-waits the rest, so
 * that timer lateness does not add to low-queue-depth latency; at higher
 * depth it only sleeps and never takes a CPU from the client.
 * --sleep-replies instead sleeps in the worker (one thread per in-flight
 * request; about half the throughput here).
 */
enum rkind { R_BUF, R_WRITE, R_ERR };

struct pending {
	uint64_t t;       /* when the reply is sent */
	fuse_req_t req;
	int kind;
	int err;
	const char *buf;  /* R_BUF: data (read at reply time) */
	size_t len;
	char *owned;      /* freed after the reply */
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct pending *h;
	size_t n, cap;
	uint64_t sleeping_until; /* deadline the reply thread waits for; 0: none */
	uint64_t late_ewma;      /* mean timer lateness (EWMA), ns */
	pthread_t thread;
} RQ = { .mu = PTHREAD_MUTEX_INITIALIZER };

#define SPIN_MARGIN_NS 10000ull /* added to twice the mean timer lateness */

static void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void send_reply(struct pending *p)
{
	int left = io_end();
	uint64_t now = mono_ns(), late = now > p->t ? now - p->t : 0;
	atomic_fetch_add(&G.replies, 1);
	atomic_fetch_add(&G.reply_late_sum_ns, late);
	uint64_t m = atomic_load(&G.reply_late_max_ns);
	while (late > m && !atomic_compare_exchange_weak(&G.reply_late_max_ns, &m, late))
		;
	switch (p->kind) {
	case R_BUF:
		fuse_reply_buf(p->req, p->buf, p->len);
		break;
	case R_WRITE:
		fuse_reply_write(p->req, p->len);
		break;
	default:
		fuse_reply_err(p->req, p->err);
	}
	free(p->owned);
	if (left == 0)
		io_idle(now);
}

static void rq_push(const struct pending *p)
{
	pthread_mutex_lock(&RQ.mu);
	if (RQ.n == RQ.cap) {
		size_t nc = RQ.cap ? RQ.cap * 2 : 1024;
		struct pending *nh = realloc(RQ.h, nc * sizeof(*nh));
		if (!nh) {
			pthread_mutex_unlock(&RQ.mu);
			sleep_until(p->t); /* degrade: reply from this thread */
			struct pending c = *p;
			send_reply(&c);
			return;
		}
		RQ.h = nh;
		RQ.cap = nc;
	}
	size_t i = RQ.n++;
	while (i > 0 && RQ.h[(i - 1) / 2].t > p->t) {
		RQ.h[i] = RQ.h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	RQ.h[i] = *p;
	/* wake the reply thread only if it sleeps past this deadline */
	if (i == 0 && (RQ.sleeping_until == 0 || p->t < RQ.sleeping_until))
		pthread_cond_signal(&RQ.cv);
	pthread_mutex_unlock(&RQ.mu);
}

static void rq_pop_locked(struct pending *out)
{
	*out = RQ.h[0];
	struct pending last = RQ.h[--RQ.n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= RQ.n)
			break;
		if (c + 1 < RQ.n && RQ.h[c + 1].t < RQ.h[c].t)
			c++;
		if (RQ.h[c].t >= last.t)
			break;
		RQ.h[i] = RQ.h[c];
		i = c;
	}
	if (RQ.n)
		RQ.h[i] = last;
}

static void *reply_main(void *arg)
{
	(void)arg;
	/* wake-ups within the slack are coalesced by the kernel: one wake-up
	   sends every reply due by then (replies are late by <= the slack) */
	prctl(PR_SET_TIMERSLACK, (unsigned long)G.o.reply_slack_ns, 0, 0, 0);
	prctl(PR_SET_NAME, (unsigned long)"emu-reply", 0, 0, 0);
	struct pending batch[64];
	pthread_mutex_lock(&RQ.mu);
	for (;;) {
		if (RQ.n == 0) {
			RQ.sleeping_until = UINT64_MAX;
			pthread_cond_wait(&RQ.cv, &RQ.mu);
			RQ.sleeping_until = 0;
			continue;
		}
		uint64_t now = mono_ns();
		if (RQ.h[0].t > now) {
			/*
			 * Timer wake-ups on this kind of VM are late by ~15 us
			 * typically and by 100 us and more at times.  At low queue
			 * depth (where that lateness would show as latency) wake
			 * early by twice the measured mean lateness and spin the
			 * rest (in slices of at most 20 us, so that a new earlier
			 * deadline is seen); at higher depth the dies are the
			 * bottleneck and plain sleeps leave the CPUs to the client.
			 */
			uint64_t w, t = RQ.h[0].t;
			int spin_ok = atomic_load(&G.inflight) <= (int)G.o.spin_max_inflight;
			uint64_t lead = reply_lead(RQ.late_ewma, SPIN_MARGIN_NS, G.o.spin_window_ns);
			if (reply_wait_plan(now, t, lead, spin_ok, &w) == REPLY_SPIN) {
				pthread_mutex_unlock(&RQ.mu);
				uint64_t until = t < now + 20000 ? t : now + 20000;
				while (mono_ns() < until)
					spin_pause();
				pthread_mutex_lock(&RQ.mu);
				continue;
			}
			struct timespec ts = { .tv_sec = (time_t)(w / 1000000000ull),
					       .tv_nsec = (long)(w % 1000000000ull) };
			RQ.sleeping_until = w;
			int r = pthread_cond_timedwait(&RQ.cv, &RQ.mu, &ts);
			RQ.sleeping_until = 0;
			if (r == ETIMEDOUT) {
				uint64_t late = mono_ns() - w;
				if (late > G.o.spin_window_ns)
					late = G.o.spin_window_ns;
				RQ.late_ewma = reply_late_update(RQ.late_ewma, late);
			}
			continue;
		}
		size_t nb = 0;
		while (RQ.n && RQ.h[0].t <= now && nb < sizeof(batch) / sizeof(batch[0]))
			rq_pop_locked(&batch[nb++]);
		pthread_mutex_unlock(&RQ.mu);
		for (size_t i = 0; i < nb; i++)
			send_reply(&batch[i]);
		pthread_mutex_lock(&RQ.mu);
	}
	return NULL;
}

/* workers send replies that are due on their way back to /dev/fuse */
static void rq_drain_due(void)
{
	struct pending batch[16];
	if (pthread_mutex_trylock(&RQ.mu) != 0)
		return;
	size_t nb = 0;
	if (RQ.n && RQ.h[0].t <= mono_ns()) {
		uint64_t now = mono_ns();
		while (RQ.n && RQ.h[0].t <= now && nb < sizeof(batch) / sizeof(batch[0]))
			rq_pop_locked(&batch[nb++]);
	}
	pthread_mutex_unlock(&RQ.mu);
	for (size_t i = 0; i < nb; i++)
		send_reply(&batch[i]);
}

static void rq_start(void)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&RQ.cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_create(&RQ.thread, NULL, reply_main, NULL);
}

/*
 * Reply to a request that arrived at `arrival` and that the model completes
 * at t: at t minus the FUSE floor (now, later from the reply thread, or
 * after a sleep).
 */
static void complete(fuse_req_t req, uint64_t arrival, uint64_t t, int kind, int err,
		     const char *buf, size_t len, char *owned)
{
	t = reply_send_time(t, atomic_load(&G.floor_ns), arrival);
	struct pending p = { t, req, kind, err, buf, len, owned };
	if (G.o.sleep_replies || t <= mono_ns()) {
		sleep_until(t);
		send_reply(&p);
		return;
	}
	rq_push(&p);
}

static void disk_read(fuse_req_t req, size_t size, off_t off)
{
	uint64_t o = (uint64_t)off;
	if (o >= G.size || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	uint64_t len = size;
	if (len > G.size - o)
		len = G.size - o;
	uint64_t now = mono_ns(), spike = 0, done;
	io_begin(now);
	pthread_mutex_lock(&G.lock);
	int e = fault_check_locked(F_READ, o, len, &spike);
	done = e ? now : ftl_read_bytes(G.ftl, o, len, now);
	int ncorr = 0;
	struct range corr[MAX_RANGES];
	if (!e)
		for (int i = 0; i < G.flt.n_corrupt; i++)
			if (overlaps(&G.flt.corrupt[i], o, len))
				corr[ncorr++] = G.flt.corrupt[i];
	pthread_mutex_unlock(&G.lock);
	if (e) {
		io_end();
		fuse_reply_err(req, e);
		return;
	}
	if (ncorr) {
		uint8_t *copy = malloc(len);
		if (!copy) {
			io_end();
			fuse_reply_err(req, ENOMEM);
			return;
		}
		memcpy(copy, G.store + o, len);
		uint64_t ps = ftl_get_config(G.ftl)->page_size, flips = 0;
		for (int i = 0; i < ncorr; i++) {
			uint64_t a = corr[i].off > o ? corr[i].off : o;
			uint64_t z = corr[i].off + corr[i].len < o + len ? corr[i].off + corr[i].len
									   : o + len;
			/* one flipped byte per mapping unit touched */
			for (uint64_t p = a; p < z; p = (p / ps + 1) * ps) {
				copy[p - o] ^= 0xff;
				flips++;
			}
		}
		pthread_mutex_lock(&G.lock);
		G.flt.corruptions_injected += flips;
		pthread_mutex_unlock(&G.lock);
		complete(req, now, done + spike, R_BUF, 0, (const char *)copy, len, (char *)copy);
		return;
	}
	complete(req, now, done + spike, R_BUF, 0, (const char *)G.store + o, len, NULL);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	if (ino == INO_DISK) {
		disk_read(req, size, off);
		return;
	}
	if (ino == INO_STATS) {
		struct stats_fh *h = (struct stats_fh *)(uintptr_t)fi->fh;
		pthread_mutex_lock(&h->mu);
		if (off == 0 || !h->buf) { /* a read at 0 takes a fresh snapshot */
			free(h->buf);
			h->buf = stats_json(&h->len);
		}
		size_t n = 0;
		if (h->buf && (size_t)off < h->len) {
			n = h->len - (size_t)off;
			if (n > size)
				n = size;
		}
		/* copy out and unlock BEFORE replying: once the reply is sent the
		   reader may close the file and RELEASE (another thread) frees h */
		char *out = n ? malloc(n) : NULL;
		if (out)
			memcpy(out, h->buf + off, n);
		pthread_mutex_unlock(&h->mu);
		if (n && !out)
			fuse_reply_err(req, ENOMEM);
		else
			fuse_reply_buf(req, out, n);
		free(out);
		return;
	}
	fuse_reply_err(req, ino == INO_CONTROL ? EBADF : EISDIR);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)fi;
	if (ino == INO_CONTROL) {
		int r = run_commands(buf, size);
		if (r)
			fuse_reply_err(req, -r);
		else
			fuse_reply_write(req, size);
		return;
	}
	if (ino != INO_DISK) {
		fuse_reply_err(req, EBADF);
		return;
	}
	uint64_t o = (uint64_t)off;
	if (size == 0) {
		fuse_reply_write(req, 0);
		return;
	}
	if (o >= G.size) {
		fuse_reply_err(req, ENOSPC);
		return;
	}
	uint64_t len = size;
	if (len > G.size - o)
		len = G.size - o;
	uint64_t now = mono_ns(), spike = 0, done = now;
	io_begin(now);
	pthread_mutex_lock(&G.lock);
	int e = fault_check_locked(F_WRITE, o, len, &spike);
	if (!e)
		done = ftl_write_bytes(G.ftl, o, len, now);
	pthread_mutex_unlock(&G.lock);
	if (e) {
		io_end();
		fuse_reply_err(req, e);
		return;
	}
	memcpy(G.store + o, buf, len);
	complete(req, now, done + spike, R_WRITE, 0, NULL, len, NULL);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			 struct fuse_file_info *fi)
{
	(void)fi;
	if (ino != INO_DISK) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	uint64_t o = (uint64_t)offset, len = (uint64_t)length;
	if (offset < 0 || length <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (!(mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))) {
		/* plain preallocation: the device is fully provisioned */
		if (!(mode & FALLOC_FL_KEEP_SIZE) && o + len > G.size) {
			fuse_reply_err(req, ENOSPC);
			return;
		}
		fuse_reply_err(req, 0);
		return;
	}
	if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (o >= G.size) {
		fuse_reply_err(req, 0);
		return;
	}
	if (len > G.size - o)
		len = G.size - o;
	uint64_t now = mono_ns(), spike = 0, done = now;
	io_begin(now);
	pthread_mutex_lock(&G.lock);
	int e = fault_check_locked(F_WRITE, o, len, &spike);
	if (!e) {
		/* TRIM (and ZERO_RANGE, deterministic zeroes after trim): whole
		   mapping units are unmapped; partial edges are zeroed in the data
		   but stay mapped in the model */
		done = ftl_trim_bytes(G.ftl, o, len, now, NULL, NULL);
		store_zero(o, len);
	}
	pthread_mutex_unlock(&G.lock);
	if (e) {
		io_end();
		fuse_reply_err(req, e);
		return;
	}
	complete(req, now, done + spike, R_ERR, 0, NULL, 0, NULL);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	(void)fi;
	if (ino == INO_DISK) {
		pthread_mutex_lock(&G.lock);
		bool gone = G.flt.vanished;
		int e = G.flt.vanish_errno;
		G.flush_cmds++;
		uint64_t now = mono_ns(), done = now + ftl_get_config(G.ftl)->t_ctrl_ns;
		pthread_mutex_unlock(&G.lock);
		if (gone) {
			fuse_reply_err(req, e);
			return;
		}
		/* no volatile write cache is modelled: a flush costs one command */
		io_begin(now);
		complete(req, now, done, R_ERR, 0, NULL, 0, NULL);
		return;
	}
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs s;
	memset(&s, 0, sizeof(s));
	s.f_bsize = 4096;
	s.f_frsize = 4096;
	s.f_blocks = G.size / 4096;
	s.f_files = 4;
	s.f_namemax = 255;
	fuse_reply_statfs(req, &s);
}

static const struct fuse_lowlevel_ops OPS = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readdir = op_readdir,
	.open = op_open,
	.release = op_release,
	.read = op_read,
	.write = op_write,
	.fallocate = op_fallocate,
	.flush = op_flush,
	.fsync = op_fsync,
	.statfs = op_statfs,
};

/* ------------------------------------------------------------------ */
/* worker threads */

/*
 * Our own multi-threaded loop instead of fuse_session_loop_mt(): a fixed
 * pool, so concurrency never waits for thread creation, and no
 * pthread_cancel at shutdown (libfuse 3.14's cancel-and-join teardown
 * crashed in glibc's tcache_thread_shutdown here, intermittently).
 */
static void *worker_main(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, (unsigned long)"emu-worker", 0, 0, 0);
	struct fuse_buf fbuf = { .mem = NULL };
	while (!fuse_session_exited(G.se)) {
		int res = fuse_session_receive_buf(G.se, &fbuf);
		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res <= 0) {
			/* -ENODEV: unmounted; anything else is fatal too */
			fuse_session_exit(G.se);
			break;
		}
		fuse_session_process_buf(G.se, &fbuf);
		if (!G.o.sleep_replies)
			rq_drain_due();
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* background thread: advances idle GC / SLC folding in real time */

static void *bg_main(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, (unsigned long)"emu-bg", 0, 0, 0);
	while (!atomic_load(&G.stop)) {
		uint64_t t = mono_ns() + 5000000ull;
		pthread_mutex_lock(&G.lock);
		ftl_idle(G.ftl, mono_ns());
		pthread_mutex_unlock(&G.lock);
		sleep_until(t);
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* command line */

static void usage(FILE *out)
{
	fprintf(out,
"usage: ssdlab-emu [options] MOUNTPOINT\n"
"\n"
"Emulated SSD over FUSE: MOUNTPOINT/disk (device), MOUNTPOINT/stats (JSON),\n"
"MOUNTPOINT/control (commands).  Sizes take K/M/G/T suffixes (binary).\n"
"\n"
"  --profile NAME            enterprise-tlc (default), client-slc, max-op\n"
"  --size SIZE               user capacity (default 1G)\n"
"  --op FRACTION             over-provisioning as a fraction of user capacity\n"
"  --channels N              channels\n"
"  --dies-per-channel N      dies per channel\n"
"  --blocks-per-die N        blocks per die (0: derived from --size and --op)\n"
"  --pages-per-block N       pages per block (0: auto)\n"
"  --page-size SIZE          page = mapping unit (default 4K)\n"
"  --gc-policy P             greedy | cost-benefit\n"
"  --gc-low-wm N             free blocks per die that trigger foreground GC (0: auto)\n"
"  --slc-size SIZE|N%%        SLC cache size in user bytes (0: none)\n"
"  --slc-fold-rate SIZE      bytes/s of SLC data folded into TLC when idle\n"
"  --t-read-us US            TLC page read\n"
"  --t-read-slc-us US        SLC page read\n"
"  --t-prog-us US            TLC page program\n"
"  --t-prog-slc-us US        SLC page program\n"
"  --t-erase-us US           block erase\n"
"  --t-xfer-us US            page transfer controller <-> die\n"
"  --ctrl-us US              per-command controller overhead\n"
"  --time-scale X            multiply every latency by X (default 1)\n"
"  --zero-latency            all latencies 0 (emulator ceiling benchmark)\n"
"  --idle-gc on|off          background GC when idle\n"
"  --idle-threshold-ms MS    host idle time before background work\n"
"  --idle-gc-rate N          blocks reclaimed per second when idle\n"
"  --idle-gc-target N        free blocks per die idle GC aims for (0: auto)\n"
"  --fault-eio-range OFF:LEN[:read|write|rw]   (repeatable)\n"
"  --fault-eio-after-writes N\n"
"  --fault-latency-spike EVERY:MS\n"
"  --fault-corrupt-range OFF:LEN               (repeatable)\n"
"  --backing FILE            keep data in FILE (e.g. /dev/shm/x, sparse) instead of RAM\n"
"  --threads N               FUSE worker threads (default 4; 256 with --sleep-replies)\n"
"  --max-background N        FUSE max_background (default 512)\n"
"  --no-parallel-writes      do not ask for parallel O_DIRECT writes\n"
"  --sleep-replies           sleep in the worker until completion instead of\n"
"                            queueing the reply for the reply thread\n"
"  --reply-slack-us US       timer slack of the reply thread (default 5)\n"
"  --spin-max-inflight N     while <= N requests are in flight, the reply thread\n"
"                            wakes early by twice its measured timer lateness\n"
"                            and busy-waits the rest (default 1; 0: never spin)\n"
"  --spin-window-us US       cap of that early wake-up (default 100)\n"
"  --fuse-floor-us auto|US   send replies this much before the model's completion\n"
"                            time, for the FUSE round trip outside the daemon\n"
"                            (default auto: measured from the client's turnarounds\n"
"                            at queue depth 1; 0: off)\n"
"  --fuse-floor-max-us US    turnarounds above this are client idle time, not\n"
"                            floor: cap of the measured floor (default 50)\n"
"  --allow-other             let other users access the mount\n"
"  --pid-file FILE           write the daemon pid to FILE\n"
"  -f, --foreground          stay in the foreground\n"
"  -d, --debug               FUSE debug output (implies -f)\n"
"  --dump-config             print the stats JSON of a fresh device and exit\n"
"  --list-profiles           list the built-in profiles\n"
"  -h, --help, -V, --version\n");
}

enum {
	O_PROFILE = 1000, O_SIZE, O_OP, O_CHANNELS, O_DPC, O_BPD, O_PPB, O_PAGE, O_GCPOL, O_LOWWM,
	O_SLC, O_FOLD, O_TR, O_TRS, O_TP, O_TPS, O_TE, O_TX, O_CTRL, O_SCALE, O_ZERO, O_IDLEGC,
	O_IDLETH, O_IDLERATE, O_IDLETGT, O_F_EIO, O_F_EIOW, O_F_SPIKE, O_F_CORR, O_BACKING,
	O_THREADS, O_MAXBG, O_NOPAR, O_ALLOW, O_PID, O_DUMP, O_LIST, O_SLEEPR, O_RSLACK, O_SPINQD, O_SPINWIN,
	O_FLOOR, O_FLOORMAX
};

static const struct option LONGOPTS[] = {
	{ "profile", required_argument, 0, O_PROFILE },
	{ "size", required_argument, 0, O_SIZE },
	{ "op", required_argument, 0, O_OP },
	{ "channels", required_argument, 0, O_CHANNELS },
	{ "dies-per-channel", required_argument, 0, O_DPC },
	{ "blocks-per-die", required_argument, 0, O_BPD },
	{ "pages-per-block", required_argument, 0, O_PPB },
	{ "page-size", required_argument, 0, O_PAGE },
	{ "gc-policy", required_argument, 0, O_GCPOL },
	{ "gc-low-wm", required_argument, 0, O_LOWWM },
	{ "slc-size", required_argument, 0, O_SLC },
	{ "slc-fold-rate", required_argument, 0, O_FOLD },
	{ "t-read-us", required_argument, 0, O_TR },
	{ "t-read-slc-us", required_argument, 0, O_TRS },
	{ "t-prog-us", required_argument, 0, O_TP },
	{ "t-prog-slc-us", required_argument, 0, O_TPS },
	{ "t-erase-us", required_argument, 0, O_TE },
	{ "t-xfer-us", required_argument, 0, O_TX },
	{ "ctrl-us", required_argument, 0, O_CTRL },
	{ "time-scale", required_argument, 0, O_SCALE },
	{ "zero-latency", no_argument, 0, O_ZERO },
	{ "idle-gc", required_argument, 0, O_IDLEGC },
	{ "idle-threshold-ms", required_argument, 0, O_IDLETH },
	{ "idle-gc-rate", required_argument, 0, O_IDLERATE },
	{ "idle-gc-target", required_argument, 0, O_IDLETGT },
	{ "fault-eio-range", required_argument, 0, O_F_EIO },
	{ "fault-eio-after-writes", required_argument, 0, O_F_EIOW },
	{ "fault-latency-spike", required_argument, 0, O_F_SPIKE },
	{ "fault-corrupt-range", required_argument, 0, O_F_CORR },
	{ "backing", required_argument, 0, O_BACKING },
	{ "threads", required_argument, 0, O_THREADS },
	{ "max-background", required_argument, 0, O_MAXBG },
	{ "no-parallel-writes", no_argument, 0, O_NOPAR },
	{ "allow-other", no_argument, 0, O_ALLOW },
	{ "pid-file", required_argument, 0, O_PID },
	{ "dump-config", no_argument, 0, O_DUMP },
	{ "sleep-replies", no_argument, 0, O_SLEEPR },
	{ "reply-slack-us", required_argument, 0, O_RSLACK },
	{ "spin-max-inflight", required_argument, 0, O_SPINQD },
	{ "spin-window-us", required_argument, 0, O_SPINWIN },
	{ "fuse-floor-us", required_argument, 0, O_FLOOR },
	{ "fuse-floor-max-us", required_argument, 0, O_FLOORMAX },
	{ "list-profiles", no_argument, 0, O_LIST },
	{ "foreground", no_argument, 0, 'f' },
	{ "debug", no_argument, 0, 'd' },
	{ "help", no_argument, 0, 'h' },
	{ "version", no_argument, 0, 'V' },
	{ 0, 0, 0, 0 },
};

static int die_usage(const char *opt, const char *val)
{
	fprintf(stderr, "ssdlab-emu: bad value for --%s: '%s'\n", opt, val);
	return 2;
}

/* split "A:B[:C]" into up to 3 parts (modifies s) */
static int split3(char *s, char **a, char **b, char **c)
{
	*a = s;
	*b = strchr(s, ':');
	if (!*b)
		return -1;
	*(*b)++ = 0;
	*c = strchr(*b, ':');
	if (*c)
		*(*c)++ = 0;
	return 0;
}

/* relative paths are resolved before the daemon changes to / */
static const char *absolute(const char *p)
{
	if (!p || p[0] == '/')
		return p;
	char cwd[4096];
	if (!getcwd(cwd, sizeof(cwd)))
		return p;
	size_t n = strlen(cwd) + strlen(p) + 2;
	char *r = malloc(n);
	if (!r)
		return p;
	snprintf(r, n, "%s/%s", cwd, p);
	return r;
}

static int parse_args(int argc, char **argv)
{
	G.o.profile = "enterprise-tlc";
	G.o.time_scale = 1.0;
	G.o.max_threads = 0; /* auto */
	G.o.reply_slack_ns = 5000;
	G.o.spin_max_inflight = 1;
	G.o.spin_window_ns = 100000;
	G.o.floor_auto = true;
	G.o.floor_max_ns = 50000;
	G.o.max_background = 512;
	G.o.parallel_writes = true;
	G.flt.eio_after_writes = -1;
	G.flt.vanish_errno = ENODEV;

	/* pass 1: profile */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--profile") && i + 1 < argc)
			G.o.profile = argv[i + 1];
		else if (!strncmp(argv[i], "--profile=", 10))
			G.o.profile = argv[i] + 10;
	}
	const struct profile *p = find_profile(G.o.profile);
	if (!p) {
		fprintf(stderr, "ssdlab-emu: unknown profile '%s'\n", G.o.profile);
		return 2;
	}
	struct ftl_config *c = &G.cfg;
	ftl_config_default(c);
	c->channels = p->channels;
	c->dies_per_channel = p->dies_per_channel;
	c->op = p->op;
	c->gc_policy = p->gc;
	c->idle_gc = p->idle_gc;
	c->idle_threshold_ns = (uint64_t)(p->idle_threshold_ms * 1e6);
	c->idle_gc_rate = p->idle_gc_rate;
	c->slc_fold_rate = (uint64_t)(p->slc_fold_mbs * 1048576.0);
	double lat[7] = { p->t_read_us, p->t_read_slc_us, p->t_prog_us, p->t_prog_slc_us,
			  p->t_erase_us, p->t_xfer_us, p->t_ctrl_us };
	double slc_frac = p->slc_frac;
	uint64_t slc_bytes = 0;
	bool slc_abs = false;

	optind = 1;
	int ch;
	while ((ch = getopt_long(argc, argv, "fdhV", LONGOPTS, NULL)) != -1) {
		uint64_t u;
		double d;
		int on;
		char *tmp, *a, *b, *cc;
		const char *name = NULL;
		for (const struct option *lo = LONGOPTS; lo->name; lo++)
			if (lo->val == ch)
				name = lo->name;
		switch (ch) {
		case 'f': G.o.foreground = true; break;
		case 'd': G.o.debug = true; G.o.foreground = true; break;
		case 'h': usage(stdout); exit(0);
		case 'V': printf("ssdlab-emu %s (stats schema %d)\n", EMU_VERSION, STATS_SCHEMA); exit(0);
		case O_PROFILE: break;
		case O_SIZE:
			if (parse_size(optarg, &u) || !u) return die_usage(name, optarg);
			c->user_bytes = u;
			break;
		case O_OP:
			if (parse_double(optarg, &d) || !(d > 0)) return die_usage(name, optarg);
			c->op = d;
			break;
		case O_CHANNELS: case O_DPC: case O_BPD: case O_PPB: case O_LOWWM: case O_IDLETGT:
			if (parse_u64(optarg, &u) || u > UINT32_MAX) return die_usage(name, optarg);
			if (ch == O_CHANNELS) c->channels = (uint32_t)u;
			if (ch == O_DPC) c->dies_per_channel = (uint32_t)u;
			if (ch == O_BPD) c->blocks_per_die = (uint32_t)u;
			if (ch == O_PPB) c->pages_per_block = (uint32_t)u;
			if (ch == O_LOWWM) c->gc_low_wm = (uint32_t)u;
			if (ch == O_IDLETGT) c->idle_gc_target = (uint32_t)u;
			break;
		case O_PAGE:
			if (parse_size(optarg, &u) || !u || u > (1u << 20)) return die_usage(name, optarg);
			c->page_size = (uint32_t)u;
			break;
		case O_GCPOL:
			if (!strcmp(optarg, "greedy")) c->gc_policy = FTL_GC_GREEDY;
			else if (!strcmp(optarg, "cost-benefit") || !strcmp(optarg, "cb"))
				c->gc_policy = FTL_GC_COST_BENEFIT;
			else return die_usage(name, optarg);
			break;
		case O_SLC: {
			size_t n = strlen(optarg);
			if (n > 1 && optarg[n - 1] == '%') {
				tmp = strndup(optarg, n - 1);
				int bad = parse_double(tmp, &d);
				free(tmp);
				if (bad || d < 0 || d > 100) return die_usage(name, optarg);
				slc_frac = d / 100.0;
				slc_abs = false;
			} else {
				if (parse_size(optarg, &u)) return die_usage(name, optarg);
				slc_bytes = u;
				slc_abs = true;
			}
			break;
		}
		case O_FOLD:
			if (parse_size(optarg, &u)) return die_usage(name, optarg);
			c->slc_fold_rate = u;
			break;
		case O_TR: case O_TRS: case O_TP: case O_TPS: case O_TE: case O_TX: case O_CTRL:
			if (parse_double(optarg, &d) || d < 0) return die_usage(name, optarg);
			lat[ch - O_TR] = d;
			break;
		case O_SCALE:
			if (parse_double(optarg, &d) || d < 0) return die_usage(name, optarg);
			G.o.time_scale = d;
			break;
		case O_ZERO: G.o.zero_latency = true; break;
		case O_IDLEGC:
			if (parse_onoff(optarg, &on)) return die_usage(name, optarg);
			c->idle_gc = on;
			break;
		case O_IDLETH:
			if (parse_double(optarg, &d) || d < 0) return die_usage(name, optarg);
			c->idle_threshold_ns = (uint64_t)(d * 1e6);
			break;
		case O_IDLERATE:
			if (parse_double(optarg, &d) || d < 0) return die_usage(name, optarg);
			c->idle_gc_rate = d;
			break;
		case O_F_EIO: case O_F_CORR: {
			tmp = strdup(optarg);
			uint64_t off, len;
			int ops = F_READ | F_WRITE;
			int bad = split3(tmp, &a, &b, &cc) || parse_size(a, &off) ||
				  parse_size(b, &len) || (ch == O_F_EIO && cc && parse_ops(cc, &ops)) ||
				  (ch == O_F_CORR && cc);
			free(tmp);
			if (bad) return die_usage(name, optarg);
			/* range validity is checked once the size is known */
			if (ch == O_F_EIO) {
				if (G.flt.n_eio >= MAX_RANGES) return die_usage(name, optarg);
				G.flt.eio[G.flt.n_eio++] = (struct range){ off, len, ops };
			} else {
				if (G.flt.n_corrupt >= MAX_RANGES) return die_usage(name, optarg);
				G.flt.corrupt[G.flt.n_corrupt++] = (struct range){ off, len, F_READ };
			}
			break;
		}
		case O_F_EIOW:
			if (parse_u64(optarg, &u)) return die_usage(name, optarg);
			G.flt.eio_after_writes = (int64_t)u;
			break;
		case O_F_SPIKE: {
			tmp = strdup(optarg);
			uint64_t every, ms;
			int bad = split3(tmp, &a, &b, &cc) || parse_u64(a, &every) ||
				  parse_u64(b, &ms) || cc || every == 0;
			free(tmp);
			if (bad) return die_usage(name, optarg);
			G.flt.spike_every = every;
			G.flt.spike_ms = ms;
			break;
		}
		case O_BACKING: G.o.backing = optarg; break;
		case O_THREADS:
			if (parse_u64(optarg, &u) || u < 1 || u > 100000) return die_usage(name, optarg);
			G.o.max_threads = (unsigned)u;
			break;
		case O_MAXBG:
			if (parse_u64(optarg, &u) || u < 1 || u > 65535) return die_usage(name, optarg);
			G.o.max_background = (unsigned)u;
			break;
		case O_NOPAR: G.o.parallel_writes = false; break;
		case O_ALLOW: G.o.allow_other = true; break;
		case O_PID: G.o.pid_file = optarg; break;
		case O_DUMP: G.o.dump_config = true; break;
		case O_SLEEPR: G.o.sleep_replies = true; break;
		case O_SPINQD:
			if (parse_u64(optarg, &u) || u > 1000000) return die_usage(name, optarg);
			G.o.spin_max_inflight = (unsigned)u;
			break;
		case O_SPINWIN:
			if (parse_double(optarg, &d) || d < 0) return die_usage(name, optarg);
			G.o.spin_window_ns = (uint64_t)(d * 1000.0);
			break;
		case O_FLOOR:
			if (!strcmp(optarg, "auto")) {
				G.o.floor_auto = true;
				break;
			}
			if (parse_double(optarg, &d) || d < 0 || d > 1e6) return die_usage(name, optarg);
			G.o.floor_auto = false;
			G.o.floor_fixed_ns = (uint64_t)(d * 1000.0);
			break;
		case O_FLOORMAX:
			if (parse_double(optarg, &d) || d < 0 || d > 1e6) return die_usage(name, optarg);
			G.o.floor_max_ns = (uint64_t)(d * 1000.0);
			break;
		case O_RSLACK:
			if (parse_double(optarg, &d) || d < 0 || d > 10000) return die_usage(name, optarg);
			G.o.reply_slack_ns = (uint64_t)(d * 1000.0);
			if (!G.o.reply_slack_ns)
				G.o.reply_slack_ns = 1;
			break;
		case O_LIST:
			for (size_t i = 0; i < NPROFILES; i++)
				printf("%-16s %s\n", PROFILES[i].name, PROFILES[i].desc);
			exit(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc)
		G.o.mountpoint = absolute(argv[optind++]);
	G.o.pid_file = absolute(G.o.pid_file);
	G.o.backing = absolute(G.o.backing);
	if (optind < argc) {
		fprintf(stderr, "ssdlab-emu: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!G.o.max_threads)
		G.o.max_threads = G.o.sleep_replies ? 256 : 4;
	if (!G.o.mountpoint && !G.o.dump_config) {
		usage(stderr);
		return 2;
	}
	c->slc_bytes = slc_abs ? slc_bytes
			       : (uint64_t)((double)c->user_bytes * slc_frac);
	for (int i = 0; i < 7; i++)
		G.lat_us[i] = G.o.zero_latency ? 0.0 : lat[i];
	double s = G.o.time_scale * 1000.0; /* us -> ns */
	c->t_read_ns = (uint64_t)llround(G.lat_us[0] * s);
	c->t_read_slc_ns = (uint64_t)llround(G.lat_us[1] * s);
	c->t_prog_ns = (uint64_t)llround(G.lat_us[2] * s);
	c->t_prog_slc_ns = (uint64_t)llround(G.lat_us[3] * s);
	c->t_erase_ns = (uint64_t)llround(G.lat_us[4] * s);
	c->t_xfer_ns = (uint64_t)llround(G.lat_us[5] * s);
	c->t_ctrl_ns = (uint64_t)llround(G.lat_us[6] * s);
	return 0;
}

static int write_pid_file(void)
{
	if (!G.o.pid_file)
		return 0;
	FILE *f = fopen(G.o.pid_file, "w");
	if (!f) {
		fprintf(stderr, "ssdlab-emu: %s: %s\n", G.o.pid_file, strerror(errno));
		return -1;
	}
	fprintf(f, "%d\n", (int)getpid());
	fclose(f);
	return 0;
}

/*
 * Fork into the background.  The parent waits until the child reports
 * readiness (one byte 0 on the pipe) and exits 0, or 1 if the child failed.
 */
static int daemonize(int *ready_fd)
{
	int pfd[2];
	if (pipe(pfd) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0) {
		close(pfd[1]);
		char c = 1;
		ssize_t n = read(pfd[0], &c, 1);
		_exit(n == 1 && c == 0 ? 0 : 1);
	}
	close(pfd[0]);
	setsid();
	if (chdir("/") != 0) { /* not fatal */ }
	int nul = open("/dev/null", O_RDWR);
	if (nul >= 0) {
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		if (nul > 2)
			close(nul);
	}
	*ready_fd = pfd[1];
	return 0;
}

int main(int argc, char **argv)
{
	int rc = parse_args(argc, argv);
	if (rc)
		return rc;
	char err[256];
	G.ftl = ftl_create(&G.cfg, err, sizeof(err));
	if (!G.ftl) {
		fprintf(stderr, "ssdlab-emu: %s\n", err);
		return 2;
	}
	G.size = ftl_get_geometry(G.ftl)->user_bytes;
	for (int i = 0; i < G.flt.n_eio; i++)
		if (G.flt.eio[i].off >= G.size || !G.flt.eio[i].len) {
			fprintf(stderr, "ssdlab-emu: --fault-eio-range outside the device\n");
			return 2;
		}
	for (int i = 0; i < G.flt.n_corrupt; i++)
		if (G.flt.corrupt[i].off >= G.size || !G.flt.corrupt[i].len) {
			fprintf(stderr, "ssdlab-emu: --fault-corrupt-range outside the device\n");
			return 2;
		}
	pthread_mutex_init(&G.lock, NULL);
	G.start_ns = mono_ns();
	clock_gettime(CLOCK_REALTIME, &G.start_wall);
	G.last_cmd_ok = true;
	reply_floor_init(&FL.est, G.o.floor_max_ns);
	if (!G.o.floor_auto)
		atomic_store(&G.floor_ns, G.o.floor_fixed_ns);
	if (G.o.dump_config) {
		size_t len;
		char *j = stats_json(&len);
		fwrite(j, 1, len, stdout);
		free(j);
		ftl_destroy(G.ftl);
		return 0;
	}
	/* precise sleeps: the default 50 us timer slack would distort latencies */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	if (store_open())
		return 1;

	/* FUSE session */
	char fsname[] = "-ofsname=ssdlab-emu,subtype=ssdlab-emu";
	char *fargv[8];
	int fargc = 0;
	fargv[fargc++] = argv[0];
	fargv[fargc++] = fsname;
	char allow[] = "-oallow_other";
	if (G.o.allow_other)
		fargv[fargc++] = allow;
	char dbg[] = "-d";
	if (G.o.debug)
		fargv[fargc++] = dbg;
	struct fuse_args args = FUSE_ARGS_INIT(fargc, fargv);
	G.se = fuse_session_new(&args, &OPS, sizeof(OPS), NULL);
	if (!G.se) {
		fprintf(stderr, "ssdlab-emu: fuse_session_new failed\n");
		return 1;
	}
	if (fuse_set_signal_handlers(G.se) != 0) {
		fuse_session_destroy(G.se);
		return 1;
	}
	if (fuse_session_mount(G.se, G.o.mountpoint) != 0) {
		fprintf(stderr, "ssdlab-emu: cannot mount on %s\n", G.o.mountpoint);
		fuse_remove_signal_handlers(G.se);
		fuse_session_destroy(G.se);
		return 1;
	}
	/* the launcher exits only once the child is set up: the mount exists
	   and the pid file is written */
	int ready_fd = -1;
	if (!G.o.foreground && daemonize(&ready_fd) != 0) {
		fuse_session_unmount(G.se);
		fuse_remove_signal_handlers(G.se);
		fuse_session_destroy(G.se);
		return 1;
	}
	if (write_pid_file() != 0 && ready_fd >= 0) {
		char no = 1;
		if (write(ready_fd, &no, 1) < 0) { /* launcher reports failure */ }
		fuse_session_unmount(G.se);
		return 1;
	}
	G.start_ns = mono_ns();
	/* the background thread must not take SIGTERM/SIGINT/SIGHUP: libfuse's
	   handler only flags the session, and the main thread must be the one
	   woken (worker threads block these signals already) */
	sigset_t sigs, old;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, &sigs, &old);
	pthread_create(&G.bg_thread, NULL, bg_main, NULL);
	rq_start();
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ready_fd >= 0) {
		char ok = 0;
		if (write(ready_fd, &ok, 1) < 0) { /* launcher sees EOF: failure */ }
		close(ready_fd);
	}

	/* a fixed pool of workers, all blocked in read(/dev/fuse); workers
	   never get cancelled (see worker_main) */
	rc = 0;
	unsigned started = 0;
	pthread_sigmask(SIG_BLOCK, &sigs, &old);
	for (unsigned i = 0; i < G.o.max_threads; i++) {
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setstacksize(&at, 256 * 1024);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &at, worker_main, NULL) == 0)
			started++;
		pthread_attr_destroy(&at);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!started) {
		fprintf(stderr, "ssdlab-emu: cannot start worker threads\n");
		fuse_session_exit(G.se);
		rc = 1;
	}
	/* wait for SIGTERM/SIGINT/SIGHUP (libfuse's handlers flag the session)
	   or for an external unmount (a worker sees ENODEV and flags it) */
	while (!fuse_session_exited(G.se))
		usleep(20000);

	atomic_store(&G.stop, true);
	pthread_join(G.bg_thread, NULL);
	fuse_session_unmount(G.se);
	/* let modelled in-flight requests finish (bounded) */
	for (int i = 0; i < 100 && atomic_load(&G.inflight) > 0; i++)
		usleep(10000);
	fuse_remove_signal_handlers(G.se);
	if (G.o.pid_file)
		unlink(G.o.pid_file);
	/* exit without joining or destroying: workers may still sit in read()
	   on the dead session; process exit reclaims everything */
	fflush(NULL);
	_exit(rc);
}
