/*
 * ftl.c - deterministic SSD FTL model.  See ftl.h for the contract.
 */
#include "ftl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNMAPPED   UINT32_MAX
#define INVALID    UINT32_MAX
#define SLC_FLAG   0x80000000u
#define NO_BLOCK   UINT32_MAX

enum blk_state { BLK_FREE = 0, BLK_OPEN = 1, BLK_CLOSED = 2 };
enum stream { S_HOST = 0, S_GC = 1, S_COUNT = 2 };

struct block {
	uint32_t valid;       /* valid pages */
	uint32_t wp;          /* next page to program */
	uint32_t erase_count;
	uint8_t state;
	uint64_t mtime;       /* model time of the last program (cost-benefit age) */
};

struct die {
	uint64_t busy_until;
	uint32_t *freeq;      /* FIFO ring of free block indices (die-local) */
	uint32_t fq_head, fq_count;
	uint32_t active[S_COUNT];   /* die-local block index or NO_BLOCK */
	uint64_t valid;       /* valid TLC pages on this die */
	/* incremental foreground GC */
	uint32_t victim;      /* die-local block index or NO_BLOCK */
	uint32_t vscan;       /* next page of the victim to examine */
	double credit, rate;
};

struct ftl {
	struct ftl_config cfg;
	struct ftl_geometry geo;
	uint32_t ndies, bpd, ppb;
	uint64_t user_pages, phys_pages;
	uint32_t *l2p;        /* user page -> ppn | SLC_FLAG|slot | UNMAPPED */
	uint32_t *p2l;        /* ppn -> user page | INVALID */
	struct block *blk;    /* ndies * bpd */
	struct die *die;
	uint32_t rr;          /* round-robin die pointer for host writes */
	uint64_t die_limit;   /* max valid pages a die may take host data for */
	/* SLC cache: FIFO ring of slots */
	uint64_t slc_cap;
	uint32_t *slc;        /* slot -> user page | INVALID */
	uint64_t slc_head, slc_tail, slc_valid;
	/* time */
	uint64_t now;         /* latest time seen (monotonic clamp) */
	uint64_t last_host_end;
	uint64_t ctrl_busy;     /* the controller processes commands one at a time */
	/* steady-state diagnostics (sampled per host TLC page program) */
	uint64_t erased_pages;  /* programmable pages: free blocks + open-block tails */
	uint64_t tlc_valid;
	double sum_erased, sum_valid;
	uint64_t samples;
	int bg_armed;
	uint64_t gc_next, fold_next;
	int idle_gc;
	/* stats */
	struct ftl_stats st;
	uint64_t lifetime_erases, lifetime_host_bytes, lifetime_nand_pages;
};

/* ------------------------------------------------------------------ */
/* helpers */

static inline uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static inline struct block *blk_of(struct ftl *f, uint32_t d, uint32_t b)
{
	return &f->blk[(uint64_t)d * f->bpd + b];
}

static inline uint32_t ppn_of(struct ftl *f, uint32_t d, uint32_t b, uint32_t pg)
{
	return (uint32_t)(((uint64_t)d * f->bpd + b) * f->ppb + pg);
}

static inline void ppn_split(struct ftl *f, uint32_t ppn, uint32_t *d, uint32_t *b)
{
	uint64_t gb = ppn / f->ppb;
	*d = (uint32_t)(gb / f->bpd);
	*b = (uint32_t)(gb % f->bpd);
}

static void seterr(char *err, size_t n, const char *fmt, ...)
{
	if (!err || !n)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, n, fmt, ap);
	va_end(ap);
}

double ftl_lambert_w0(double x)
{
	if (x >= 0.0 && x < 1e-300)
		return 0.0;
	if (x <= -1.0 / M_E)
		return -1.0;
	/* initial guess: series near the branch point, else log-based */
	double w;
	if (x < -0.25) {
		double p = sqrt(2.0 * (M_E * x + 1.0));
		w = -1.0 + p - p * p / 3.0 + 11.0 / 72.0 * p * p * p;
	} else {
		w = x;
	}
	for (int i = 0; i < 100; i++) { /* Halley */
		double ew = exp(w);
		double fw = w * ew - x;
		double d = ew * (w + 1.0) - (w + 2.0) * fw / (2.0 * w + 2.0);
		if (d == 0.0)
			break;
		double nw = w - fw / d;
		if (fabs(nw - w) < 1e-15 * (1.0 + fabs(nw))) {
			w = nw;
			break;
		}
		w = nw;
	}
	return w;
}

double ftl_analytic_wa(double alpha)
{
	if (alpha <= 1.0)
		return INFINITY;
	return alpha / (alpha + ftl_lambert_w0(-alpha * exp(-alpha)));
}

void ftl_config_default(struct ftl_config *c)
{
	memset(c, 0, sizeof(*c));
	c->channels = 4;
	c->dies_per_channel = 2;
	c->blocks_per_die = 0;
	c->pages_per_block = 0; /* auto */
	c->page_size = 4096;
	c->op = 0.07;
	c->user_bytes = 1ull << 30;
	c->gc_policy = FTL_GC_GREEDY;
	c->gc_low_wm = 0;
	c->slc_bytes = 0;
	c->slc_fold_rate = 64ull << 20;
	c->t_read_ns = 100000;
	c->t_read_slc_ns = 50000;
	c->t_prog_ns = 200000;
	c->t_prog_slc_ns = 100000;
	c->t_erase_ns = 2000000;
	c->t_xfer_ns = 2000;
	c->t_ctrl_ns = 5000;
	c->idle_gc = 1;
	c->idle_threshold_ns = 500000000ull;
	c->idle_gc_rate = 100.0;
	c->idle_gc_target = 0;
}

/* ------------------------------------------------------------------ */
/* free pool */

static void freeq_push(struct ftl *f, uint32_t d, uint32_t b)
{
	struct die *D = &f->die[d];
	D->freeq[(D->fq_head + D->fq_count) % f->bpd] = b;
	D->fq_count++;
}

static uint32_t freeq_pop(struct ftl *f, uint32_t d)
{
	struct die *D = &f->die[d];
	if (!D->fq_count)
		return NO_BLOCK;
	uint32_t b = D->freeq[D->fq_head];
	D->fq_head = (D->fq_head + 1) % f->bpd;
	D->fq_count--;
	return b;
}

/* ------------------------------------------------------------------ */
/* NAND ops: each occupies its die from max(t, busy) for the duration */

static uint64_t die_op(struct ftl *f, uint32_t d, uint64_t t, uint64_t dur)
{
	struct die *D = &f->die[d];
	uint64_t s = max64(t, D->busy_until);
	D->busy_until = s + dur;
	return D->busy_until;
}

static uint64_t erase_block(struct ftl *f, uint32_t d, uint32_t b, uint64_t t)
{
	struct block *B = blk_of(f, d, b);
	B->valid = 0;
	B->wp = 0;
	B->state = BLK_FREE;
	B->erase_count++;
	f->lifetime_erases++;
	f->st.blocks_erased++;
	f->erased_pages += f->ppb;
	freeq_push(f, d, b);
	return die_op(f, d, t, f->cfg.t_erase_ns);
}

/* invalidate whatever user page lba currently maps to */
static void invalidate(struct ftl *f, uint64_t lba)
{
	uint32_t m = f->l2p[lba];
	if (m == UNMAPPED)
		return;
	if (m & SLC_FLAG) {
		uint32_t slot = m & ~SLC_FLAG;
		f->slc[slot] = INVALID;
		f->slc_valid--;
	} else {
		uint32_t d, b;
		ppn_split(f, m, &d, &b);
		f->p2l[m] = INVALID;
		blk_of(f, d, b)->valid--;
		f->die[d].valid--;
		f->tlc_valid--;
	}
	f->l2p[lba] = UNMAPPED;
}

/*
 * Take the next page of the open block of (die, stream), opening a new
 * block from the free queue when needed.  Returns the ppn or INVALID if the
 * die has no free block at all (must not happen: GC keeps reserves).
 */
static uint32_t alloc_page(struct ftl *f, uint32_t d, int s, uint64_t t)
{
	struct die *D = &f->die[d];
	uint32_t b = D->active[s];
	if (b == NO_BLOCK || blk_of(f, d, b)->wp >= f->ppb) {
		if (b != NO_BLOCK)
			blk_of(f, d, b)->state = BLK_CLOSED;
		b = freeq_pop(f, d);
		D->active[s] = b;
		if (b == NO_BLOCK)
			return INVALID;
		blk_of(f, d, b)->state = BLK_OPEN;
	}
	struct block *B = blk_of(f, d, b);
	uint32_t pg = B->wp++;
	B->mtime = t;
	if (B->wp >= f->ppb) {
		B->state = BLK_CLOSED;
		D->active[s] = NO_BLOCK;
	}
	return ppn_of(f, d, b, pg);
}

/* map lba to a freshly allocated TLC page on die d, stream s */
static int place_tlc(struct ftl *f, uint64_t lba, uint32_t d, int s, uint64_t t)
{
	uint32_t ppn = alloc_page(f, d, s, t);
	if (ppn == INVALID)
		return -1;
	uint32_t dd, b;
	ppn_split(f, ppn, &dd, &b);
	f->p2l[ppn] = (uint32_t)lba;
	f->l2p[lba] = ppn;
	blk_of(f, d, b)->valid++;
	f->die[d].valid++;
	f->tlc_valid++;
	f->erased_pages--;
	f->st.nand_prog_pages++;
	f->st.nand_prog_pages_tlc++;
	f->lifetime_nand_pages++;
	return 0;
}

/* ------------------------------------------------------------------ */
/* garbage collection */

static uint32_t select_victim(struct ftl *f, uint32_t d, uint64_t now)
{
	struct die *D = &f->die[d];
	uint32_t best = NO_BLOCK;
	double best_score = -1.0;
	uint32_t best_valid = UINT32_MAX;
	uint64_t best_mtime = UINT64_MAX;
	for (uint32_t b = 0; b < f->bpd; b++) {
		struct block *B = blk_of(f, d, b);
		if (B->state != BLK_CLOSED || b == D->active[S_HOST] || b == D->active[S_GC])
			continue;
		if (B->valid >= f->ppb)
			continue; /* nothing to gain */
		if (f->cfg.gc_policy == FTL_GC_GREEDY) {
			if (B->valid < best_valid ||
			    (B->valid == best_valid && B->mtime < best_mtime)) {
				best = b;
				best_valid = B->valid;
				best_mtime = B->mtime;
			}
		} else {
			double u = (double)B->valid / f->ppb;
			double age = now > B->mtime ? (double)(now - B->mtime) : 0.0;
			double score = (u == 0.0) ? INFINITY : (1.0 - u) / (2.0 * u) * (age + 1.0);
			if (score > best_score) {
				best = b;
				best_score = score;
			}
		}
	}
	return best;
}

static int gc_start(struct ftl *f, uint32_t d, uint64_t now)
{
	struct die *D = &f->die[d];
	uint32_t v = select_victim(f, d, now);
	if (v == NO_BLOCK)
		return -1;
	D->victim = v;
	D->vscan = 0;
	D->credit = 0.0;
	uint32_t valid = blk_of(f, d, v)->valid;
	D->rate = (double)valid / (double)(f->ppb - valid);
	f->st.gc_invocations++;
	return 0;
}

/* relocate the next valid page of the victim; returns 1 if a page moved */
static int gc_move_one(struct ftl *f, uint32_t d, uint64_t *t)
{
	struct die *D = &f->die[d];
	while (D->vscan < f->ppb) {
		uint32_t ppn = ppn_of(f, d, D->victim, D->vscan++);
		uint32_t lba = f->p2l[ppn];
		if (lba == INVALID)
			continue;
		invalidate(f, lba);
		if (place_tlc(f, lba, d, S_GC, *t) < 0) {
			/* cannot happen with the reserves kept; keep data safe */
			fprintf(stderr, "ftl: die %u out of blocks during GC\n", d);
			abort();
		}
		*t = die_op(f, d, *t, f->cfg.t_read_ns + f->cfg.t_prog_ns);
		f->st.nand_read_pages++;
		f->st.pages_relocated++;
		return 1;
	}
	return 0;
}

static void gc_finish_if_done(struct ftl *f, uint32_t d, uint64_t *t)
{
	struct die *D = &f->die[d];
	if (D->victim == NO_BLOCK)
		return;
	struct block *B = blk_of(f, d, D->victim);
	if (B->valid == 0) {
		*t = erase_block(f, d, D->victim, *t);
		D->victim = NO_BLOCK;
	}
}

/* collect one whole victim on die d (continuing the current one if any) */
static int gc_collect_block(struct ftl *f, uint32_t d, uint64_t *t)
{
	struct die *D = &f->die[d];
	if (D->victim == NO_BLOCK && gc_start(f, d, *t) < 0)
		return -1;
	while (gc_move_one(f, d, t))
		;
	gc_finish_if_done(f, d, t);
	return 0;
}

/* a foreground victim was selected: count it, and note when GC first started */
static void note_fg_victim(struct ftl *f, uint64_t t)
{
	f->st.gc_fg_blocks++;
	if (!f->st.gc_started) {
		f->st.gc_started = 1;
		f->st.gc_start_host_write_bytes = f->st.host_write_bytes;
		f->st.gc_start_ns = t;
	}
}

/*
 * Foreground GC step for one host page on die d: start a victim when the
 * free pool is below the low watermark, move credit-worth pages, and fall
 * back to synchronous collection when the die is about to run dry.
 */
static void fg_gc(struct ftl *f, uint32_t d, uint64_t *t)
{
	struct die *D = &f->die[d];
	uint32_t lw = f->cfg.gc_low_wm;
	if (D->victim == NO_BLOCK && D->fq_count < lw) {
		if (gc_start(f, d, *t) == 0)
			note_fg_victim(f, *t);
	}
	if (D->victim != NO_BLOCK) {
		/* v/(P-v) moves per host page balance consumption and reclaim;
		   below the watermark GC speeds up so the pool recovers */
		uint32_t deficit = D->fq_count + 1 < lw ? lw - 1 - D->fq_count : 0;
		D->credit += D->rate * (1.0 + 0.5 * deficit);
		while (D->credit >= 1.0) {
			if (!gc_move_one(f, d, t))
				break;
			D->credit -= 1.0;
		}
		/* a victim that has been scanned completely is erased */
		if (D->vscan >= f->ppb || blk_of(f, d, D->victim)->valid == 0) {
			while (gc_move_one(f, d, t))
				;
			gc_finish_if_done(f, d, t);
		}
	}
	/* emergency: the host is about to open a block and would leave the GC
	   stream without one: collect whole victims now (the host waits) */
	uint32_t hb = D->active[S_HOST];
	int host_needs_block = hb == NO_BLOCK || blk_of(f, d, hb)->wp >= f->ppb;
	while (host_needs_block && D->fq_count < 2) {
		int had = D->victim != NO_BLOCK;
		uint64_t selected_at = *t;
		if (gc_collect_block(f, d, t) < 0)
			break;
		f->st.gc_emergency++;
		if (!had)
			note_fg_victim(f, selected_at);
	}
}

/* ------------------------------------------------------------------ */
/* background work */

static uint32_t idle_gc_die(struct ftl *f)
{
	uint32_t best = UINT32_MAX, bestfree = UINT32_MAX;
	for (uint32_t d = 0; d < f->ndies; d++) {
		uint32_t fc = f->die[d].fq_count;
		if (fc < f->cfg.idle_gc_target && fc < bestfree) {
			best = d;
			bestfree = fc;
		}
	}
	return best;
}

static void fold_one(struct ftl *f, uint64_t t)
{
	/* skip reclaimed (invalid) slots for free */
	while (f->slc_head < f->slc_tail && f->slc[f->slc_head % f->slc_cap] == INVALID)
		f->slc_head++;
	if (f->slc_head >= f->slc_tail)
		return;
	uint64_t slot = f->slc_head % f->slc_cap;
	uint32_t lba = f->slc[slot];
	uint32_t d = (uint32_t)(f->slc_head % f->ndies);
	struct die *D = &f->die[d];
	uint64_t tt = t;
	/* make room on the die first (idle: whole-block GC) */
	while (D->fq_count < 2 || (D->fq_count < f->cfg.gc_low_wm && D->victim == NO_BLOCK)) {
		if (gc_collect_block(f, d, &tt) < 0)
			break;
		f->st.gc_bg_blocks++;
	}
	invalidate(f, lba);
	f->slc_head++;
	if (place_tlc(f, lba, d, S_GC, tt) < 0) {
		fprintf(stderr, "ftl: die %u out of blocks during SLC fold\n", d);
		abort();
	}
	die_op(f, d, tt, f->cfg.t_read_slc_ns + f->cfg.t_prog_ns);
	f->st.nand_read_pages++;
	f->st.slc_fold_pages++;
	/* drop trailing invalid slots so occupancy reflects reality */
	while (f->slc_head < f->slc_tail && f->slc[f->slc_head % f->slc_cap] == INVALID)
		f->slc_head++;
}

static void bg_advance(struct ftl *f, uint64_t now)
{
	if (!f->bg_armed) {
		uint64_t start = f->last_host_end + f->cfg.idle_threshold_ns;
		f->gc_next = f->cfg.idle_gc_rate > 0
			? start + (uint64_t)(1e9 / f->cfg.idle_gc_rate) : UINT64_MAX;
		f->fold_next = f->cfg.slc_fold_rate > 0
			? start + (uint64_t)(1e9 * f->cfg.page_size / (double)f->cfg.slc_fold_rate)
			: UINT64_MAX;
		f->bg_armed = 1;
	}
	if (f->slc_cap && f->cfg.slc_fold_rate > 0) {
		uint64_t per = (uint64_t)(1e9 * f->cfg.page_size / (double)f->cfg.slc_fold_rate);
		if (per == 0)
			per = 1;
		while (f->fold_next <= now) {
			if (f->slc_valid == 0) {
				f->slc_head = f->slc_tail;
				f->fold_next = now + per; /* nothing to do: don't bank budget */
				break;
			}
			fold_one(f, f->fold_next);
			f->fold_next += per;
		}
	}
	if (f->idle_gc && f->cfg.idle_gc_rate > 0) {
		uint64_t per = (uint64_t)(1e9 / f->cfg.idle_gc_rate);
		if (per == 0)
			per = 1;
		while (f->gc_next <= now) {
			uint32_t d = idle_gc_die(f);
			if (d == UINT32_MAX) {
				f->gc_next = now + per;
				break;
			}
			uint64_t t = f->gc_next;
			if (gc_collect_block(f, d, &t) < 0) {
				f->gc_next = now + per;
				break;
			}
			f->st.gc_bg_blocks++;
			f->gc_next += per;
		}
	}
}

static uint64_t begin_cmd(struct ftl *f, uint64_t now)
{
	if (now < f->now)
		now = f->now; /* clamp: model time never runs backwards */
	f->now = now;
	bg_advance(f, now);
	return now;
}

/*
 * Per-command controller overhead occupies the (single) controller: the
 * command's NAND work starts when the controller is done with it.  This
 * also caps the device at 1 / t_ctrl commands per second.
 */
static uint64_t ctrl_admit(struct ftl *f, uint64_t now)
{
	uint64_t s = max64(now, f->ctrl_busy);
	f->ctrl_busy = s + f->cfg.t_ctrl_ns;
	return f->ctrl_busy;
}

static void end_cmd(struct ftl *f, uint64_t done)
{
	if (done > f->last_host_end)
		f->last_host_end = done;
	f->bg_armed = 0;
}

void ftl_idle(struct ftl *f, uint64_t now)
{
	if (now < f->now)
		return;
	f->now = now;
	bg_advance(f, now);
}

void ftl_set_idle_gc(struct ftl *f, int on)
{
	f->idle_gc = on ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* host commands */

static uint32_t pick_die(struct ftl *f)
{
	for (uint32_t i = 0; i < f->ndies; i++) {
		uint32_t d = f->rr;
		f->rr = (f->rr + 1) % f->ndies;
		if (f->die[d].valid < f->die_limit)
			return d;
	}
	uint32_t d = f->rr;
	f->rr = (f->rr + 1) % f->ndies;
	return d;
}

static uint64_t read_page_at(struct ftl *f, uint64_t lba, uint64_t t, int *was_mapped)
{
	uint32_t m = f->l2p[lba];
	*was_mapped = m != UNMAPPED;
	if (m == UNMAPPED)
		return t;
	f->st.nand_read_pages++;
	if (m & SLC_FLAG) {
		uint32_t slot = m & ~SLC_FLAG;
		/* slot index modulo the ring; the die is fixed by the absolute
		   slot number, which equals slot + k*cap: use slot % ndies only
		   when cap is a multiple of ndies (enforced at create) */
		uint32_t d = slot % f->ndies;
		return die_op(f, d, t, f->cfg.t_read_slc_ns) + f->cfg.t_xfer_ns;
	}
	uint32_t d, b;
	ppn_split(f, m, &d, &b);
	return die_op(f, d, t, f->cfg.t_read_ns) + f->cfg.t_xfer_ns;
}

/* program one host page; rmw: read the old copy first if mapped */
static uint64_t write_page(struct ftl *f, uint64_t lba, uint64_t t, int rmw)
{
	uint64_t ready = t + f->cfg.t_xfer_ns;
	if (rmw) {
		int mapped;
		uint64_t r = read_page_at(f, lba, t, &mapped);
		if (mapped)
			ready = max64(ready, r);
	}
	invalidate(f, lba);
	f->st.host_prog_pages++;
	if (f->slc_cap && f->slc_tail - f->slc_head < f->slc_cap) {
		uint64_t abs = f->slc_tail++;
		uint32_t slot = (uint32_t)(abs % f->slc_cap);
		uint32_t d = slot % f->ndies;
		f->slc[slot] = (uint32_t)lba;
		f->slc_valid++;
		f->l2p[lba] = SLC_FLAG | slot;
		f->st.nand_prog_pages++;
		f->st.nand_prog_pages_slc++;
		f->lifetime_nand_pages++;
		return die_op(f, d, ready, f->cfg.t_prog_slc_ns);
	}
	uint32_t d = pick_die(f);
	uint64_t g = t;
	fg_gc(f, d, &g);
	f->sum_erased += (double)f->erased_pages;
	f->sum_valid += (double)f->tlc_valid;
	f->samples++;
	if (place_tlc(f, lba, d, S_HOST, ready) < 0) {
		fprintf(stderr, "ftl: die %u out of blocks for host write\n", d);
		abort();
	}
	return die_op(f, d, ready, f->cfg.t_prog_ns);
}

static uint64_t do_write(struct ftl *f, uint64_t first, uint64_t n, int rmw_head,
			 int rmw_tail, uint64_t host_bytes, uint64_t now)
{
	if (first >= f->user_pages || n > f->user_pages - first)
		return 0;
	now = begin_cmd(f, now);
	uint64_t start = ctrl_admit(f, now);
	uint64_t done = start;
	for (uint64_t i = 0; i < n; i++) {
		int rmw = (i == 0 && rmw_head) || (i == n - 1 && rmw_tail);
		done = max64(done, write_page(f, first + i, start, rmw));
	}
	f->st.host_write_cmds++;
	f->st.host_write_bytes += host_bytes;
	f->lifetime_host_bytes += host_bytes;
	end_cmd(f, done);
	return done;
}

uint64_t ftl_write(struct ftl *f, uint64_t lba, uint64_t n, uint64_t now)
{
	return do_write(f, lba, n, 0, 0, n * f->cfg.page_size, now);
}

uint64_t ftl_write_bytes(struct ftl *f, uint64_t off, uint64_t len, uint64_t now)
{
	uint64_t ps = f->cfg.page_size;
	if (len == 0) {
		now = begin_cmd(f, now);
		uint64_t done = ctrl_admit(f, now);
		f->st.host_write_cmds++;
		end_cmd(f, done);
		return done;
	}
	uint64_t first = off / ps, last = (off + len - 1) / ps;
	int head = off % ps != 0;
	int tail = (off + len) % ps != 0;
	return do_write(f, first, last - first + 1, head, tail, len, now);
}

static uint64_t do_read(struct ftl *f, uint64_t first, uint64_t n, uint64_t host_bytes,
			uint64_t now, uint8_t *mapped)
{
	if (first >= f->user_pages || n > f->user_pages - first)
		return 0;
	now = begin_cmd(f, now);
	uint64_t start = ctrl_admit(f, now);
	uint64_t done = start;
	for (uint64_t i = 0; i < n; i++) {
		int m;
		done = max64(done, read_page_at(f, first + i, start, &m));
		if (mapped)
			mapped[i] = (uint8_t)m;
	}
	f->st.host_read_cmds++;
	f->st.host_read_bytes += host_bytes;
	end_cmd(f, done);
	return done;
}

uint64_t ftl_read(struct ftl *f, uint64_t lba, uint64_t n, uint64_t now, uint8_t *mapped)
{
	return do_read(f, lba, n, n * f->cfg.page_size, now, mapped);
}

uint64_t ftl_read_bytes(struct ftl *f, uint64_t off, uint64_t len, uint64_t now)
{
	uint64_t ps = f->cfg.page_size;
	if (len == 0) {
		now = begin_cmd(f, now);
		uint64_t done = ctrl_admit(f, now);
		f->st.host_read_cmds++;
		end_cmd(f, done);
		return done;
	}
	uint64_t first = off / ps, last = (off + len - 1) / ps;
	return do_read(f, first, last - first + 1, len, now, NULL);
}

uint64_t ftl_trim(struct ftl *f, uint64_t lba, uint64_t n, uint64_t now)
{
	if (lba >= f->user_pages || n > f->user_pages - lba)
		return 0;
	now = begin_cmd(f, now);
	for (uint64_t i = 0; i < n; i++)
		invalidate(f, lba + i);
	f->st.host_trim_cmds++;
	f->st.trimmed_bytes += n * f->cfg.page_size;
	uint64_t done = ctrl_admit(f, now);
	end_cmd(f, done);
	return done;
}

uint64_t ftl_trim_bytes(struct ftl *f, uint64_t off, uint64_t len, uint64_t now,
			uint64_t *first_page, uint64_t *npages)
{
	uint64_t ps = f->cfg.page_size;
	uint64_t first = (off + ps - 1) / ps;
	uint64_t end = (off + len) / ps;
	uint64_t n = end > first ? end - first : 0;
	if (first_page)
		*first_page = first;
	if (npages)
		*npages = n;
	if (n == 0) {
		now = begin_cmd(f, now);
		uint64_t done = ctrl_admit(f, now);
		f->st.host_trim_cmds++;
		end_cmd(f, done);
		return done;
	}
	return ftl_trim(f, first, n, now);
}

/* ------------------------------------------------------------------ */
/* format / stats */

static void reset_layout(struct ftl *f)
{
	for (uint64_t i = 0; i < f->user_pages; i++)
		f->l2p[i] = UNMAPPED;
	for (uint64_t i = 0; i < f->phys_pages; i++)
		f->p2l[i] = INVALID;
	for (uint32_t d = 0; d < f->ndies; d++) {
		struct die *D = &f->die[d];
		D->fq_head = 0;
		D->fq_count = 0;
		D->active[S_HOST] = D->active[S_GC] = NO_BLOCK;
		D->victim = NO_BLOCK;
		D->vscan = 0;
		D->credit = D->rate = 0.0;
		D->valid = 0;
		for (uint32_t b = 0; b < f->bpd; b++) {
			struct block *B = blk_of(f, d, b);
			B->valid = 0;
			B->wp = 0;
			B->state = BLK_FREE;
			B->mtime = 0;
			freeq_push(f, d, b);
		}
	}
	if (f->slc_cap)
		for (uint64_t i = 0; i < f->slc_cap; i++)
			f->slc[i] = INVALID;
	f->slc_head = f->slc_tail = f->slc_valid = 0;
	f->rr = 0;
	f->erased_pages = f->phys_pages;
	f->tlc_valid = 0;
}

uint64_t ftl_format(struct ftl *f, uint64_t now)
{
	now = begin_cmd(f, now);
	/* every block that holds programmed pages is erased: wear is kept */
	for (uint32_t d = 0; d < f->ndies; d++) {
		for (uint32_t b = 0; b < f->bpd; b++) {
			struct block *B = blk_of(f, d, b);
			if (B->state != BLK_FREE || B->wp > 0) {
				B->erase_count++;
				f->lifetime_erases++;
				f->st.blocks_erased++;
			}
		}
	}
	reset_layout(f);
	f->st.formats++;
	/* fresh out of box again: GC has not started */
	f->st.gc_started = 0;
	f->st.gc_start_host_write_bytes = 0;
	f->st.gc_start_ns = 0;
	/* the format itself is modelled as instantaneous */
	uint64_t done = ctrl_admit(f, now);
	end_cmd(f, done);
	return done;
}

void ftl_reset_stats(struct ftl *f)
{
	memset(&f->st, 0, sizeof(f->st));
	f->sum_erased = f->sum_valid = 0.0;
	f->samples = 0;
}

int ftl_is_mapped(const struct ftl *f, uint64_t lba)
{
	return lba < f->user_pages && f->l2p[lba] != UNMAPPED;
}

uint32_t ftl_die_free_blocks(const struct ftl *f, uint32_t d)
{
	return d < f->ndies ? f->die[d].fq_count : 0;
}

void ftl_stats(const struct ftl *f, struct ftl_stats *st)
{
	*st = f->st;
	uint64_t ps = f->cfg.page_size;
	st->nand_write_bytes = st->nand_prog_pages * ps;
	st->write_amplification = st->host_write_bytes
		? (double)st->nand_write_bytes / (double)st->host_write_bytes : 0.0;
	uint64_t fb = 0, valid = 0, busy = 0;
	for (uint32_t d = 0; d < f->ndies; d++) {
		fb += f->die[d].fq_count;
		valid += f->die[d].valid;
		busy = max64(busy, f->die[d].busy_until);
	}
	st->free_blocks = fb;
	st->total_blocks = (uint64_t)f->ndies * f->bpd;
	st->valid_pages = valid + f->slc_valid;
	st->slc_used_bytes = (f->slc_tail - f->slc_head) * ps;
	st->slc_valid_bytes = f->slc_valid * ps;
	st->slc_capacity_bytes = f->slc_cap * ps;
	st->idle_gc = f->idle_gc;
	st->lifetime_erases = f->lifetime_erases;
	uint32_t mn = UINT32_MAX, mx = 0;
	double sum = 0;
	for (uint64_t i = 0; i < st->total_blocks; i++) {
		uint32_t e = f->blk[i].erase_count;
		if (e < mn) mn = e;
		if (e > mx) mx = e;
		sum += e;
	}
	st->erase_count_min = st->total_blocks ? mn : 0;
	st->erase_count_max = mx;
	st->erase_count_mean = st->total_blocks ? sum / (double)st->total_blocks : 0.0;
	st->lifetime_host_write_bytes = f->lifetime_host_bytes;
	st->lifetime_nand_write_bytes = f->lifetime_nand_pages * ps;
	st->last_now_ns = f->now;
	if (f->samples) {
		st->avg_erased_pages = f->sum_erased / (double)f->samples;
		st->avg_valid_pages = f->sum_valid / (double)f->samples;
		st->alpha_measured = st->avg_valid_pages > 0
			? ((double)f->phys_pages - st->avg_erased_pages) / st->avg_valid_pages : 0.0;
		st->analytic_wa_measured = st->alpha_measured > 1.0
			? ftl_analytic_wa(st->alpha_measured) : 0.0;
	}
	st->max_die_busy_ns = busy;
}

int ftl_check(const struct ftl *f, char *err, size_t errlen)
{
	uint64_t nb = (uint64_t)f->ndies * f->bpd;
	uint32_t *cnt = calloc(nb, sizeof(uint32_t));
	if (!cnt) {
		seterr(err, errlen, "out of memory");
		return -1;
	}
	int rc = 0;
	uint64_t slc_valid = 0, tlc_valid = 0;
	for (uint64_t l = 0; l < f->user_pages && !rc; l++) {
		uint32_t m = f->l2p[l];
		if (m == UNMAPPED)
			continue;
		if (m & SLC_FLAG) {
			uint32_t slot = m & ~SLC_FLAG;
			if (slot >= f->slc_cap || f->slc[slot] != l) {
				seterr(err, errlen, "lba %llu: bad SLC slot", (unsigned long long)l);
				rc = -1;
			}
			slc_valid++;
			continue;
		}
		if (m >= f->phys_pages || f->p2l[m] != l) {
			seterr(err, errlen, "lba %llu: L2P/P2L mismatch", (unsigned long long)l);
			rc = -1;
			break;
		}
		cnt[m / f->ppb]++;
		tlc_valid++;
	}
	for (uint64_t p = 0; p < f->phys_pages && !rc; p++) {
		uint32_t l = f->p2l[p];
		if (l != INVALID && (l >= f->user_pages || f->l2p[l] != p)) {
			seterr(err, errlen, "ppn %llu: stale P2L", (unsigned long long)p);
			rc = -1;
		}
	}
	uint64_t erased = 0;
	for (uint32_t d = 0; d < f->ndies && !rc; d++) {
		const struct die *D = &f->die[d];
		uint32_t nfree = 0;
		uint64_t dv = 0;
		for (uint32_t b = 0; b < f->bpd; b++) {
			const struct block *B = &f->blk[(uint64_t)d * f->bpd + b];
			if (B->valid != cnt[(uint64_t)d * f->bpd + b]) {
				seterr(err, errlen, "die %u block %u: valid %u, counted %u", d, b,
				       B->valid, cnt[(uint64_t)d * f->bpd + b]);
				rc = -1;
				break;
			}
			dv += B->valid;
			nfree += B->state == BLK_FREE;
			erased += f->ppb - B->wp;
			if (B->state == BLK_FREE && B->wp) {
				seterr(err, errlen, "die %u block %u: free but written", d, b);
				rc = -1;
				break;
			}
		}
		if (!rc && nfree != D->fq_count) {
			seterr(err, errlen, "die %u: %u free blocks, queue holds %u", d, nfree,
			       D->fq_count);
			rc = -1;
		}
		if (!rc && dv != D->valid) {
			seterr(err, errlen, "die %u: valid %llu, counted %llu", d,
			       (unsigned long long)D->valid, (unsigned long long)dv);
			rc = -1;
		}
	}
	if (!rc && (slc_valid != f->slc_valid || tlc_valid != f->tlc_valid)) {
		seterr(err, errlen, "valid totals differ");
		rc = -1;
	}
	if (!rc && erased != f->erased_pages) {
		seterr(err, errlen, "erased pages %llu, counted %llu",
		       (unsigned long long)f->erased_pages, (unsigned long long)erased);
		rc = -1;
	}
	free(cnt);
	return rc;
}

const struct ftl_config *ftl_get_config(const struct ftl *f) { return &f->cfg; }
const struct ftl_geometry *ftl_get_geometry(const struct ftl *f) { return &f->geo; }

/* ------------------------------------------------------------------ */
/* create / destroy */

struct ftl *ftl_create(const struct ftl_config *in, char *err, size_t errlen)
{
	struct ftl_config c = *in;
	if (!c.channels || !c.dies_per_channel || !c.page_size) {
		seterr(err, errlen, "geometry values must be > 0");
		return NULL;
	}
	if (c.page_size % 512) {
		seterr(err, errlen, "page size must be a multiple of 512");
		return NULL;
	}
	if (!(c.op > 0.0) || c.op > 10.0) {
		seterr(err, errlen, "op must be in (0, 10]");
		return NULL;
	}
	uint64_t ndies = (uint64_t)c.channels * c.dies_per_channel;
	if (c.pages_per_block == 0) {
		/* auto: largest power of two <= 256 leaving >= 512 user blocks per
		   die, so GC has enough blocks to choose from at small sizes */
		uint64_t upd = c.blocks_per_die ? 0 : c.user_bytes / c.page_size / ndies;
		uint32_t ppb = 256;
		if (c.blocks_per_die)
			ppb = 64;
		else
			while (ppb > 4 && upd / ppb < 512)
				ppb /= 2;
		c.pages_per_block = ppb;
	}
	uint64_t ppb = c.pages_per_block;
	uint64_t user_pages, phys_pages;
	if (c.blocks_per_die == 0) {
		user_pages = c.user_bytes / c.page_size;
		if (!user_pages) {
			seterr(err, errlen, "user capacity smaller than one page");
			return NULL;
		}
		double need = ceil((double)user_pages * (1.0 + c.op));
		uint64_t blocks = (uint64_t)ceil(need / (double)ppb);
		uint64_t bpd = (blocks + ndies - 1) / ndies;
		c.blocks_per_die = (uint32_t)bpd;
		phys_pages = bpd * ndies * ppb;
	} else {
		phys_pages = (uint64_t)c.blocks_per_die * ndies * ppb;
		user_pages = (uint64_t)floor((double)phys_pages / (1.0 + c.op));
	}
	if (phys_pages >= (uint64_t)SLC_FLAG) {
		seterr(err, errlen, "device too large for the 31-bit physical page map");
		return NULL;
	}
	if (c.gc_low_wm == 0) {
		uint32_t lw = c.blocks_per_die / 100;
		c.gc_low_wm = lw < 3 ? 3 : lw;
	}
	if (c.gc_low_wm < 3)
		c.gc_low_wm = 3;
	uint64_t user_blocks_pd = (user_pages + ndies * ppb - 1) / (ndies * ppb);
	if (c.blocks_per_die < user_blocks_pd + c.gc_low_wm + 4) {
		seterr(err, errlen,
		       "not enough spare blocks: %u blocks/die, %llu needed for user data, "
		       "%u low watermark + 4 reserve (raise op or size)",
		       c.blocks_per_die, (unsigned long long)user_blocks_pd, c.gc_low_wm);
		return NULL;
	}
	uint32_t spare_pd = (uint32_t)(c.blocks_per_die - user_blocks_pd);
	if (c.idle_gc_target == 0)
		c.idle_gc_target = c.gc_low_wm + (spare_pd - c.gc_low_wm - 2) / 3;
	if (c.idle_gc_target > c.blocks_per_die)
		c.idle_gc_target = c.blocks_per_die;

	struct ftl *f = calloc(1, sizeof(*f));
	if (!f) {
		seterr(err, errlen, "out of memory");
		return NULL;
	}
	f->ndies = (uint32_t)ndies;
	f->bpd = c.blocks_per_die;
	f->ppb = (uint32_t)ppb;
	f->user_pages = user_pages;
	f->phys_pages = phys_pages;
	/* a die stops taking host data when this full, so GC always has room */
	f->die_limit = ((uint64_t)f->bpd - c.gc_low_wm - 3) * ppb;
	/* SLC cache: whole pages, multiple of ndies */
	uint64_t slc_pages = c.slc_bytes / c.page_size;
	slc_pages -= slc_pages % ndies;
	if (slc_pages >= SLC_FLAG)
		slc_pages = 0;
	f->slc_cap = slc_pages;
	c.slc_bytes = slc_pages * c.page_size;
	c.user_bytes = user_pages * c.page_size;
	f->cfg = c;
	f->idle_gc = c.idle_gc;

	f->l2p = malloc(user_pages * sizeof(uint32_t));
	f->p2l = malloc(phys_pages * sizeof(uint32_t));
	f->blk = calloc(ndies * f->bpd, sizeof(struct block));
	f->die = calloc(ndies, sizeof(struct die));
	f->slc = slc_pages ? malloc(slc_pages * sizeof(uint32_t)) : NULL;
	int bad = !f->l2p || !f->p2l || !f->blk || !f->die || (slc_pages && !f->slc);
	for (uint32_t d = 0; !bad && d < ndies; d++) {
		f->die[d].freeq = malloc(f->bpd * sizeof(uint32_t));
		bad = !f->die[d].freeq;
	}
	if (bad) {
		ftl_destroy(f);
		seterr(err, errlen, "out of memory");
		return NULL;
	}
	reset_layout(f);

	struct ftl_geometry *g = &f->geo;
	g->ndies = f->ndies;
	g->phys_pages = phys_pages;
	g->user_pages = user_pages;
	g->user_bytes = user_pages * c.page_size;
	g->phys_bytes = phys_pages * c.page_size;
	g->total_blocks = ndies * f->bpd;
	g->slc_pages = slc_pages;
	g->effective_op = (double)phys_pages / (double)user_pages - 1.0;
	/* in steady state each die holds about gc_low_wm blocks of erased
	   pages (free pool + open-block tails; measured: low_wm + ~0.15):
	   that space cannot hold invalid pages, so it is no spare for GC */
	double reserve = (double)ndies * c.gc_low_wm * ppb;
	g->alpha_eff = ((double)phys_pages - reserve) / (double)user_pages;
	g->analytic_wa = ftl_analytic_wa(g->alpha_eff);
	return f;
}

void ftl_destroy(struct ftl *f)
{
	if (!f)
		return;
	if (f->die)
		for (uint32_t d = 0; d < f->ndies; d++)
			free(f->die[d].freeq);
	free(f->die);
	free(f->blk);
	free(f->p2l);
	free(f->l2p);
	free(f->slc);
	free(f);
}
