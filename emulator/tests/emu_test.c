/*
 * emu_test.c - daemon-level tests: mounts build/ssdlab-emu in a temporary
 * directory and checks data, TRIM, control commands, stats and faults
 * through the real FUSE file.  Needs root and /dev/fuse; otherwise every
 * test is reported as skipped.  Closes with "N passed, M failed[, K skipped]".
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

static char g_emu[PATH_MAX];
static char g_mnt[256];
static char g_pidfile[512];
static pid_t g_pid = -1;

static char *path(const char *name)
{
	static char buf[4][PATH_MAX];
	static int k;
	k = (k + 1) % 4;
	snprintf(buf[k], PATH_MAX, "%s/%s", g_mnt, name);
	return buf[k];
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int is_mounted(const char *mnt)
{
	FILE *f = fopen("/proc/self/mounts", "r");
	if (!f)
		return 0;
	char line[4096];
	int found = 0;
	while (fgets(line, sizeof(line), f)) {
		char dev[1024], dir[2048];
		if (sscanf(line, "%1023s %2047s", dev, dir) == 2 && !strcmp(dir, mnt))
			found = 1;
	}
	fclose(f);
	return found;
}

/* start the daemon (background mode, pid file) with extra args */
static int emu_start(const char *const *extra)
{
	snprintf(g_pidfile, sizeof(g_pidfile), "%s.pid", g_mnt);
	const char *argv[64];
	int n = 0;
	argv[n++] = g_emu;
	argv[n++] = "--pid-file";
	argv[n++] = g_pidfile;
	for (; extra && *extra && n < 60; extra++)
		argv[n++] = *extra;
	argv[n++] = g_mnt;
	argv[n] = NULL;
	pid_t p = fork();
	if (p == 0) {
		execv(g_emu, (char *const *)argv);
		_exit(127);
	}
	int st;
	waitpid(p, &st, 0); /* the launcher exits once the mount is up */
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("    daemon failed to start (status %d)\n", st);
		return -1;
	}
	FILE *f = fopen(g_pidfile, "r");
	g_pid = -1;
	for (int i = 0; i < 100 && !f; i++) {
		usleep(20000);
		f = fopen(g_pidfile, "r");
	}
	if (f) {
		int pid;
		if (fscanf(f, "%d", &pid) == 1)
			g_pid = pid;
		fclose(f);
	}
	if (!is_mounted(g_mnt) || g_pid <= 0) {
		printf("    not mounted after start\n");
		return -1;
	}
	return 0;
}

/* process gone or a zombie (the daemon is not our child after daemonize) */
static int proc_gone(pid_t pid)
{
	char p[64], buf[512];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(p, "r");
	if (!f)
		return 1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/* SIGTERM the daemon; returns 0 when it unmounted and exited */
static int emu_stop(void)
{
	if (g_pid <= 0)
		return -1;
	kill(g_pid, SIGTERM);
	int ok = -1;
	for (int i = 0; i < 250; i++) {
		if (proc_gone(g_pid) && !is_mounted(g_mnt)) {
			ok = 0;
			break;
		}
		usleep(20000);
	}
	if (ok != 0) {
		/* last resort: lazy unmount so nothing is left behind */
		kill(g_pid, SIGKILL);
		umount2(g_mnt, MNT_DETACH);
	}
	g_pid = -1;
	return ok;
}

static char *slurp(const char *p, size_t *len)
{
	int fd = open(p, O_RDONLY);
	if (fd < 0)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	char *b = malloc(cap + 1);
	for (;;) {
		ssize_t r = read(fd, b + n, cap - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		if (n == cap) {
			cap *= 2;
			b = realloc(b, cap + 1);
		}
	}
	close(fd);
	b[n] = 0;
	if (len)
		*len = n;
	return b;
}

/* value of the first "key": number in the stats JSON (-1 if absent) */
static double stat_num(const char *key)
{
	char *j = slurp(path("stats"), NULL);
	if (!j)
		return -1;
	char pat[128];
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	char *p = strstr(j, pat);
	double v = -1;
	if (p) {
		p += strlen(pat);
		if (!strncmp(p, "true", 4))
			v = 1;
		else if (!strncmp(p, "false", 5))
			v = 0;
		else
			v = strtod(p, NULL);
	}
	free(j);
	return v;
}

static int control(const char *cmd)
{
	int fd = open(path("control"), O_WRONLY);
	if (fd < 0)
		return -errno;
	ssize_t r = write(fd, cmd, strlen(cmd));
	int e = r < 0 ? -errno : 0;
	close(fd);
	return e;
}

static void fill_pattern(uint8_t *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		b[i] = (uint8_t)(seed >> 56);
	}
}

static int all_zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

static int open_disk(int direct)
{
	return open(path("disk"), O_RDWR | (direct ? O_DIRECT : 0));
}

/* ------------------------------------------------------------------ */

static void test_files_and_stats(void)
{
	struct stat st;
	CHECK(stat(path("disk"), &st) == 0 && st.st_size == (64 << 20), "disk size %lld",
	      (long long)st.st_size);
	CHECK(stat(path("stats"), &st) == 0 && (st.st_mode & 0777) == 0444, "stats mode");
	CHECK(stat(path("control"), &st) == 0 && (st.st_mode & 0777) == 0200, "control mode");
	DIR *d = opendir(g_mnt);
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += !strcmp(e->d_name, "disk") || !strcmp(e->d_name, "stats") ||
		     !strcmp(e->d_name, "control");
	if (d)
		closedir(d);
	CHECK(n == 3, "readdir found %d", n);
	size_t len;
	char *j = slurp(path("stats"), &len);
	CHECK(j && len > 500 && j[0] == '{' && strstr(j, "\"schema\": 1"), "stats json");
	CHECK(j && strstr(j, "\"user_bytes\": 67108864"), "user_bytes");
	CHECK(j && strstr(j, "\"profile\": \"enterprise-tlc\""), "profile");
	CHECK(j && strstr(j, "\"gc_start_host_write_bytes\": null") &&
	      strstr(j, "\"gc_start_ns\": null"), "GC start null on a fresh device");
	free(j);
	CHECK(open(path("stats"), O_WRONLY) < 0, "stats writable");
	CHECK(open(path("control"), O_RDONLY) < 0, "control readable");
	/* stats are fresh on every read at offset 0 of the same fd */
	int fd = open(path("stats"), O_RDONLY);
	char b1[64];
	CHECK(pread(fd, b1, sizeof(b1), 0) == (ssize_t)sizeof(b1), "pread stats");
	close(fd);
}

static void test_data_integrity(void)
{
	int fd = open_disk(1);
	CHECK(fd >= 0, "open O_DIRECT: %s", strerror(errno));
	if (fd < 0)
		return;
	size_t n = 1 << 20;
	uint8_t *w, *r;
	if (posix_memalign((void **)&w, 4096, n) || posix_memalign((void **)&r, 4096, n))
		return;
	/* unwritten space reads as zeros */
	CHECK(pread(fd, r, n, 8 << 20) == (ssize_t)n && all_zero(r, n), "FOB zeros");
	uint64_t offs[] = { 0, (2 << 20) + 4096 * 7, 5 << 20, (64 << 20) - n };
	for (int i = 0; i < 4; i++) {
		fill_pattern(w, n, (uint64_t)i + 1);
		CHECK(pwrite(fd, w, n, (off_t)offs[i]) == (ssize_t)n, "pwrite %d", i);
	}
	for (int i = 0; i < 4; i++) {
		fill_pattern(w, n, (uint64_t)i + 1);
		memset(r, 0, n);
		CHECK(pread(fd, r, n, (off_t)offs[i]) == (ssize_t)n && !memcmp(w, r, n), "verify %d", i);
	}
	/* past the end: EOF on read, ENOSPC on write */
	CHECK(pread(fd, r, 4096, 64 << 20) == 0, "read past end");
	CHECK(pwrite(fd, w, 4096, 64 << 20) < 0 && errno == ENOSPC, "write past end");
	close(fd);

	/* sub-page (512 B and odd) I/O through a non-O_DIRECT fd */
	fd = open_disk(0);
	uint8_t small[700], back[700];
	fill_pattern(small, sizeof(small), 99);
	CHECK(pwrite(fd, small, 512, 3000 * 4096 + 512) == 512, "512B write");
	CHECK(pwrite(fd, small + 512, 188, 3000 * 4096 + 4000) == 188, "odd write across pages");
	CHECK(pread(fd, back, 512, 3000 * 4096 + 512) == 512 && !memcmp(back, small, 512), "512B read");
	CHECK(pread(fd, back, 188, 3000 * 4096 + 4000) == 188 && !memcmp(back, small + 512, 188),
	      "odd read");
	CHECK(pread(fd, back, 512, 3000 * 4096) == 512 && all_zero(back, 512), "untouched head");
	close(fd);
	free(w);
	free(r);
	CHECK(stat_num("host_write_bytes") == 4.0 * n + 700, "host_write_bytes %.0f",
	      stat_num("host_write_bytes"));
}

static void test_trim(void)
{
	int fd = open_disk(1);
	size_t n = 1 << 20;
	uint8_t *w, *r;
	if (posix_memalign((void **)&w, 4096, n) || posix_memalign((void **)&r, 4096, n))
		return;
	fill_pattern(w, n, 7);
	off_t base = 10 << 20;
	CHECK(pwrite(fd, w, n, base) == (ssize_t)n, "write");
	double valid0 = stat_num("valid_pages"), trimmed0 = stat_num("trimmed_bytes");
	/* punch the middle 512 KiB (what blkdiscard on a loop device does) */
	CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, base + 256 * 1024,
			512 * 1024) == 0, "punch: %s", strerror(errno));
	CHECK(pread(fd, r, n, base) == (ssize_t)n, "read");
	CHECK(!memcmp(r, w, 256 * 1024), "head kept");
	CHECK(all_zero(r + 256 * 1024, 512 * 1024), "trimmed range reads zeros");
	CHECK(!memcmp(r + 768 * 1024, w + 768 * 1024, 256 * 1024), "tail kept");
	CHECK(stat_num("valid_pages") == valid0 - 128, "valid %.0f -> %.0f", valid0,
	      stat_num("valid_pages"));
	CHECK(stat_num("trimmed_bytes") == trimmed0 + 512 * 1024, "trimmed_bytes");
	/* partial-page punch: bytes zeroed exactly, neighbours kept */
	CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, base + 100, 1000) == 0,
	      "partial punch");
	CHECK(pread(fd, r, 4096, base) == 4096, "read");
	CHECK(!memcmp(r, w, 100) && all_zero(r + 100, 1000) && !memcmp(r + 1100, w + 1100, 2996),
	      "partial punch content");
	/* ZERO_RANGE behaves the same */
	CHECK(fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, base + 900 * 1024,
			4096) == 0, "zero range: %s", strerror(errno));
	CHECK(pread(fd, r, 4096, base + 900 * 1024) == 4096 && all_zero(r, 4096), "zeroed");
	/* plain preallocation is a no-op */
	CHECK(fallocate(fd, 0, 0, 4096) == 0, "prealloc");
	close(fd);
	free(w);
	free(r);
}

static void test_control_format(void)
{
	int fd = open_disk(1);
	uint8_t *b;
	if (posix_memalign((void **)&b, 4096, 65536))
		return;
	fill_pattern(b, 65536, 3);
	CHECK(pwrite(fd, b, 65536, 0) == 65536, "write");
	CHECK(control("bogus command\n") == -EINVAL, "bad command accepted");
	CHECK(stat_num("last_command_ok") == 0, "last_command_ok after bad command");
	CHECK(control("idle-gc maybe") == -EINVAL, "bad idle-gc arg accepted");
	CHECK(control("idle-gc off\n") == 0, "idle-gc off");
	double idle = stat_num("idle_gc"); /* config value (first match) */
	(void)idle;
	char *j = slurp(path("stats"), NULL);
	CHECK(j && strstr(j, "\"state\": {") &&
	      strstr(strstr(j, "\"state\": {"), "\"idle_gc\": false"), "state.idle_gc false");
	free(j);
	CHECK(control("idle-gc on") == 0, "idle-gc on");
	double erased = stat_num("lifetime_erases");
	CHECK(control("format\n") == 0, "format");
	CHECK(stat_num("valid_pages") == 0, "valid after format");
	CHECK(stat_num("free_blocks") == stat_num("total_blocks"), "free after format");
	CHECK(stat_num("formats") == 1, "formats counter");
	CHECK(stat_num("lifetime_erases") > erased, "wear after format");
	CHECK(pread(fd, b, 65536, 0) == 65536 && all_zero(b, 65536), "zeros after format");
	CHECK(stat_num("host_write_bytes") > 0, "format kept WA counters");
	j = slurp(path("stats"), NULL);
	CHECK(j && strstr(j, "\"gc_start_host_write_bytes\": null"), "GC start null after format");
	free(j);
	CHECK(control("sanitize") == 0, "sanitize");
	CHECK(control("reset-stats") == 0, "reset-stats");
	CHECK(stat_num("host_write_bytes") == 0 && stat_num("write_amplification") == 0,
	      "counters after reset");
	CHECK(stat_num("lifetime_erases") > 0, "lifetime wear survives reset");

	/* GC start ground truth: from FOB, sequential 64 KiB writes start foreground
	   GC once the physical capacity minus the reserve (gc_low_wm blocks per die)
	   is written; the counter is the host bytes before the triggering command */
	CHECK(control("idle-gc off; format; reset-stats") == 0, "format for GC start");
	double user = stat_num("user_bytes"), phys = stat_num("physical_bytes");
	double lo = phys - stat_num("dies") * stat_num("gc_low_wm") * stat_num("block_bytes");
	double start = 0;
	for (uint64_t done = 0; done < 3 * (uint64_t)user && start <= 0; done += 65536) {
		fill_pattern(b, 65536, done);
		if (pwrite(fd, b, 65536, (off_t)(done % (uint64_t)user)) != 65536)
			break;
		if (done % (4u << 20) == 0)
			start = stat_num("gc_start_host_write_bytes");
	}
	start = stat_num("gc_start_host_write_bytes");
	double start_ns = stat_num("gc_start_ns");
	printf("    GC started after %.0f bytes (physical %.0f - reserve = %.0f), at %.3f s\n",
	       start, phys, lo, start_ns / 1e9);
	CHECK(start >= lo - 65536 && start <= lo + stat_num("dies") * 4096, "GC start %.0f vs %.0f",
	      start, lo);
	CHECK(start_ns > 0 && start_ns <= stat_num("uptime_s") * 1e9, "gc_start_ns %.0f", start_ns);
	CHECK(control("idle-gc on") == 0, "idle-gc on again");
	close(fd);
	free(b);
}

static void test_faults(void)
{
	int fd = open_disk(0);
	uint8_t w[4096], r[4096];
	fill_pattern(w, sizeof(w), 11);
	for (int i = 0; i < 8; i++)
		CHECK(pwrite(fd, w, 4096, (off_t)(100 + i) * 4096) == 4096, "write");

	/* EIO on a range (reads only) */
	CHECK(control("fault eio-range 409600 8192 read") == 0, "set eio-range");
	CHECK(pread(fd, r, 4096, 101 * 4096) < 0 && errno == EIO, "EIO in range");
	CHECK(pread(fd, r, 4096, 103 * 4096) == 4096, "outside range ok");
	CHECK(pwrite(fd, w, 4096, 100 * 4096) == 4096, "write in read-only fault range ok");
	CHECK(stat_num("eio_injected") >= 1, "eio counter");
	CHECK(control("fault clear eio-range") == 0, "clear");
	CHECK(pread(fd, r, 4096, 101 * 4096) == 4096, "cleared");

	/* EIO after N writes */
	CHECK(control("fault eio-after-writes 3") == 0, "set eio-after-writes");
	int ok = 0;
	for (int i = 0; i < 5; i++)
		ok += pwrite(fd, w, 4096, (off_t)(200 + i) * 4096) == 4096;
	CHECK(ok == 3, "writes before EIO: %d", ok);
	CHECK(pread(fd, r, 4096, 100 * 4096) == 4096, "reads still work");
	CHECK(control("fault clear eio-after-writes") == 0, "clear");
	CHECK(pwrite(fd, w, 4096, 300 * 4096) == 4096, "writes again");

	/* silent corruption of returned data; data at rest intact */
	CHECK(control("fault corrupt-range 425984 4096") == 0, "set corrupt"); /* page 104 */
	CHECK(pread(fd, r, 4096, 104 * 4096) == 4096, "read");
	int diff = 0;
	for (int i = 0; i < 4096; i++)
		diff += r[i] != w[i];
	CHECK(diff == 1, "corrupted bytes %d", diff);
	CHECK(pread(fd, r, 4096, 105 * 4096) == 4096 && !memcmp(r, w, 4096), "neighbour intact");
	CHECK(control("fault clear corrupt-range") == 0, "clear");
	CHECK(pread(fd, r, 4096, 104 * 4096) == 4096 && !memcmp(r, w, 4096), "at rest intact");

	/* latency spikes: every I/O +30 ms */
	CHECK(control("fault latency-spike 1 30") == 0, "set spike");
	uint64_t t0 = now_ns();
	CHECK(pread(fd, r, 4096, 100 * 4096) == 4096, "read");
	uint64_t dt = now_ns() - t0;
	CHECK(dt >= 30000000ull, "spike latency %.1f ms", dt / 1e6);
	CHECK(control("fault clear latency-spike") == 0, "clear");
	t0 = now_ns();
	CHECK(pread(fd, r, 4096, 100 * 4096) == 4096, "read");
	CHECK(now_ns() - t0 < 20000000ull, "no spike after clear");

	/* device vanishes */
	CHECK(control("fault vanish") == 0, "vanish");
	CHECK(pread(fd, r, 4096, 100 * 4096) < 0 && errno == ENODEV, "ENODEV: %s", strerror(errno));
	CHECK(open_disk(0) < 0, "open after vanish");
	CHECK(stat_num("vanished") == 1, "stats readable while vanished");
	CHECK(control("fault vanish eio") == 0, "vanish eio");
	CHECK(pwrite(fd, w, 4096, 100 * 4096) < 0 && errno == EIO, "EIO variant");
	CHECK(control("fault clear") == 0, "clear all");
	CHECK(pread(fd, r, 4096, 100 * 4096) == 4096 && !memcmp(r, w, 4096), "back");
	CHECK(control("fault eio-range 999999999999 10") == -EINVAL, "range outside device");
	CHECK(control("fault latency-spike 0 10") == -EINVAL, "spike every 0");
	close(fd);
}

static void test_latency_model(void)
{
	/* With the FUSE floor off, QD1 latency is at least the modelled one:
	   write = ctrl + xfer + tPROG (FOB, no GC), read of a mapped page =
	   ctrl + tR + xfer */
	const char *args[] = { "--size", "64M", "--fuse-floor-us", "0", NULL };
	if (emu_start(args) != 0) {
		CHECK(0, "start with --fuse-floor-us 0");
		return;
	}
	CHECK(stat_num("fuse_floor_us") == 0, "floor %.3f", stat_num("fuse_floor_us"));
	double ctrl = stat_num("ctrl_overhead_us"), xfer = stat_num("t_xfer_us");
	double w_model = ctrl + xfer + stat_num("t_prog_us");
	double r_model = ctrl + xfer + stat_num("t_read_us");
	int fd = open_disk(1);
	uint8_t *b;
	if (posix_memalign((void **)&b, 4096, 4096))
		return;
	fill_pattern(b, 4096, 5);
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 20; i++) {
		uint64_t t0 = now_ns();
		if (pwrite(fd, b, 4096, (off_t)(1000 + i) * 4096) != 4096)
			break;
		uint64_t dt = now_ns() - t0;
		if (dt < best)
			best = dt;
	}
	printf("    QD1 4 KiB write: best %.0f us (model %.0f us)\n", best / 1e3, w_model);
	CHECK(best >= w_model * 1000 && best < 20 * w_model * 1000, "write latency %.0f us",
	      best / 1e3);
	uint64_t rbest = UINT64_MAX;
	for (int i = 0; i < 20; i++) {
		uint64_t t0 = now_ns();
		if (pread(fd, b, 4096, (off_t)(1000 + i) * 4096) != 4096)
			break;
		uint64_t dt = now_ns() - t0;
		if (dt < rbest)
			rbest = dt;
	}
	printf("    QD1 4 KiB read (mapped): best %.0f us (model %.0f us)\n", rbest / 1e3, r_model);
	CHECK(rbest >= r_model * 1000, "read latency %.0f us", rbest / 1e3);
	close(fd);
	free(b);
	CHECK(emu_stop() == 0, "stop");
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void test_reply_timing(void)
{
	/* default: the FUSE floor is measured in band (each request arriving at
	   an idle daemon is one sample, accepted or rejected) and replies leave
	   that much before the model's completion time, never more than the
	   cap before it */
	char *j = slurp(path("stats"), NULL);
	CHECK(j && strstr(j, "\"fuse_floor\": \"auto\""), "floor auto by default");
	free(j);
	double cap = stat_num("fuse_floor_max_us");
	CHECK(cap == 50, "cap %.1f", cap);
	double r_model = stat_num("ctrl_overhead_us") + stat_num("t_read_us") + stat_num("t_xfer_us");
	int fd = open_disk(1);
	uint8_t *b;
	if (posix_memalign((void **)&b, 4096, 4096))
		return;
	fill_pattern(b, 4096, 9);
	for (int i = 0; i < 16; i++)
		CHECK(pwrite(fd, b, 4096, (off_t)(2000 + i) * 4096) == 4096, "write");
	CHECK(control("reset-stats") == 0, "reset-stats");
	CHECK(stat_num("replies") == 0 && stat_num("reply_late_us_mean") == 0, "reset");
	double seen0 = stat_num("fuse_floor_samples") + stat_num("fuse_floor_rejected");
	enum { N = 400 };
	static uint64_t lat[N];
	int n = 0;
	for (int i = 0; i < N; i++) {
		uint64_t t0 = now_ns();
		if (pread(fd, b, 4096, (off_t)(2000 + i % 16) * 4096) != 4096)
			break;
		lat[n++] = now_ns() - t0;
	}
	CHECK(n == N, "reads %d", n);
	double seen = stat_num("fuse_floor_samples") + stat_num("fuse_floor_rejected") - seen0;
	double floor = stat_num("fuse_floor_us");
	/* samples, not a share of the requests: a request that arrives while the
	   reply thread is between sending the last reply and noting the daemon
	   idle finds no turnaround to sample, and how often that happens is up to
	   the scheduler (124 of 400 beside two CPU-bound processes on 2 CPUs) */
	CHECK(seen >= 1 && seen <= N, "turnarounds seen %.0f of %d", seen, N);
	CHECK(floor >= 0 && floor <= cap, "floor %.1f us", floor);
	CHECK(stat_num("replies") >= N, "replies %.0f", stat_num("replies"));
	CHECK(stat_num("reply_late_us_max") >= stat_num("reply_late_us_mean"), "late max >= mean");
	qsort(lat, (size_t)n, sizeof(lat[0]), cmp_u64);
	printf("    QD1 4 KiB read: median %.0f us, best %.0f us (model %.0f us, floor %.1f us, "
	       "replies late by %.1f us on average)\n", n ? lat[n / 2] / 1e3 : 0.0,
	       n ? lat[0] / 1e3 : 0.0, r_model, floor, stat_num("reply_late_us_mean"));
	/* never more than the cap before the model's time */
	CHECK(n && lat[0] >= (r_model - cap) * 1000, "best %.0f us", lat[0] / 1e3);
	close(fd);
	free(b);
}

static void test_shutdown(void)
{
	CHECK(emu_stop() == 0, "SIGTERM did not unmount");
	CHECK(!is_mounted(g_mnt), "still mounted");
	CHECK(access(g_pidfile, F_OK) != 0, "pid file left behind");
}

static void test_backing_file_and_profiles(void)
{
	char backing[PATH_MAX];
	snprintf(backing, sizeof(backing), "/dev/shm/ssdlab-emu-test-%d", (int)getpid());
	const char *args[] = { "--profile", "client-slc", "--size", "32M", "--backing", backing,
			       NULL };
	if (emu_start(args) != 0) {
		CHECK(0, "start with --backing");
		return;
	}
	CHECK(stat_num("slc_bytes") > 0, "client-slc has an SLC cache");
	int fd = open_disk(0);
	uint8_t w[8192], r[8192];
	fill_pattern(w, sizeof(w), 77);
	CHECK(pwrite(fd, w, sizeof(w), 4096) == (ssize_t)sizeof(w), "write");
	int bf = open(backing, O_RDONLY);
	CHECK(bf >= 0 && pread(bf, r, sizeof(r), 4096) == (ssize_t)sizeof(r) &&
	      !memcmp(r, w, sizeof(r)), "data in backing file");
	CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 4096) == 0, "punch");
	CHECK(pread(bf, r, 4096, 4096) == 4096 && all_zero(r, 4096), "backing punched");
	CHECK(stat_num("slc_used_bytes") == 8192, "SLC occupancy %.0f", stat_num("slc_used_bytes"));
	if (bf >= 0)
		close(bf);
	close(fd);
	CHECK(emu_stop() == 0, "stop");
	unlink(backing);

	/* bad options fail before mounting */
	const char *bad[] = { "--profile", "nope", NULL };
	pid_t p = fork();
	if (p == 0) {
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 2);
		execl(g_emu, g_emu, bad[0], bad[1], g_mnt, (char *)NULL);
		_exit(127);
	}
	int st;
	waitpid(p, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2 && !is_mounted(g_mnt), "bad profile rc");
}

/* ------------------------------------------------------------------ */

struct test {
	const char *name;
	void (*fn)(void);
	int needs_mount;
};

int main(int argc, char **argv)
{
	(void)argc;
	const char *env = getenv("SSDLAB_EMU");
	if (env) {
		snprintf(g_emu, sizeof(g_emu), "%s", env);
	} else {
		char self[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		self[n > 0 ? n : 0] = 0;
		snprintf(g_emu, sizeof(g_emu), "%s/ssdlab-emu", n > 0 ? dirname(self) : ".");
	}
	(void)argv;
	static const struct test tests[] = {
		{ "files_and_stats", test_files_and_stats, 1 },
		{ "data_integrity", test_data_integrity, 1 },
		{ "trim", test_trim, 1 },
		{ "control_format", test_control_format, 1 },
		{ "faults", test_faults, 1 },
		{ "reply_timing", test_reply_timing, 1 },
		{ "shutdown", test_shutdown, 1 },
		{ "latency_model", test_latency_model, 0 },
		{ "backing_file_and_profiles", test_backing_file_and_profiles, 0 },
	};
	int ntests = sizeof(tests) / sizeof(tests[0]);
	const char *why = NULL;
	if (geteuid() != 0)
		why = "not root";
	else if (access("/dev/fuse", R_OK | W_OK) != 0)
		why = "/dev/fuse unavailable";
	else if (access(g_emu, X_OK) != 0)
		why = "ssdlab-emu not built";
	if (why) {
		printf("daemon tests skipped: %s\n", why);
		printf("0 passed, 0 failed, %d skipped\n", ntests);
		return 0;
	}
	snprintf(g_mnt, sizeof(g_mnt), "/tmp/ssdlab-emu-test.XXXXXX");
	if (!mkdtemp(g_mnt)) {
		perror("mkdtemp");
		return 1;
	}
	int passed = 0, failed = 0, skipped = 0;
	const char *args[] = { "--size", "64M", NULL };
	int up = emu_start(args) == 0;
	for (int i = 0; i < ntests; i++) {
		g_fail = 0;
		printf("%s\n", tests[i].name);
		fflush(stdout);
		if (tests[i].needs_mount && !up) {
			printf("  FAILED (daemon not running)\n");
			failed++;
			continue;
		}
		tests[i].fn();
		if (g_fail) {
			failed++;
			printf("  FAILED %s\n", tests[i].name);
		} else {
			passed++;
			printf("  ok\n");
		}
		fflush(stdout);
	}
	if (g_pid > 0)
		emu_stop();
	if (is_mounted(g_mnt))
		umount2(g_mnt, MNT_DETACH);
	rmdir(g_mnt);
	unlink(g_pidfile);
	printf("%d passed, %d failed", passed, failed);
	if (skipped)
		printf(", %d skipped", skipped);
	printf("\n");
	return failed ? 1 : 0;
}
