/*
 * ftl.h - pure, deterministic model of an SSD flash translation layer.
 *
 * No I/O, no threads, no clock reads: every entry point takes the current
 * time in nanoseconds (any monotonic origin) and returns the modelled
 * completion time.  Callers serialise access (one lock around every call).
 *
 * Model summary (see emulator/README.md for the long version):
 *   - geometry: channels x dies_per_channel dies, each with blocks_per_die
 *     blocks of pages_per_block pages of page_size bytes.  The mapping unit
 *     is one page (4 KiB by default).
 *   - user capacity = physical / (1 + op), rounded down to whole pages (or
 *     given as user_bytes, in which case blocks_per_die is derived).
 *   - page-mapped L2P, P2L reverse map, per-block valid counts, a FIFO free
 *     block queue per die, per die one open host block and one open GC block.
 *   - host pages are striped round-robin over the dies.
 *   - foreground GC per die when its free pool drops below gc_low_wm: a victim
 *     (greedy or cost-benefit) is relocated incrementally, proportionally to
 *     host writes on that die (v/(P-v) moves per host page), then erased.
 *   - optional static SLC cache (a FIFO of slc_bytes of user data); when full,
 *     host writes go to TLC directly; idle time folds it into TLC.
 *   - idle (background) GC when no host command for idle_threshold_ns.
 *   - timing: a command first passes the controller (t_ctrl_ns, one command
 *     at a time), then its NAND ops run, each occupying its die (busy-until
 *     per die); it completes when its last NAND op completes.
 */
#ifndef SSDLAB_FTL_H
#define SSDLAB_FTL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum ftl_gc_policy { FTL_GC_GREEDY = 0, FTL_GC_COST_BENEFIT = 1 };

struct ftl_config {
	/* geometry */
	uint32_t channels;
	uint32_t dies_per_channel;
	uint32_t blocks_per_die;   /* 0: derived from user_bytes and op */
	uint32_t pages_per_block;  /* 0: auto (power of two <= 256, >= 512 user blocks/die) */
	uint32_t page_size;        /* bytes; mapping unit */
	double op;                 /* over-provisioning, fraction of user capacity */
	uint64_t user_bytes;       /* used when blocks_per_die == 0 */

	/* garbage collection */
	enum ftl_gc_policy gc_policy;
	uint32_t gc_low_wm;        /* free blocks per die below which fg GC runs; 0: auto */

	/* SLC cache */
	uint64_t slc_bytes;        /* 0: no SLC cache */
	uint64_t slc_fold_rate;    /* bytes of valid SLC data folded per second when idle */

	/* NAND timing, nanoseconds (already multiplied by any time scale) */
	uint64_t t_read_ns;        /* TLC page read */
	uint64_t t_read_slc_ns;    /* SLC page read */
	uint64_t t_prog_ns;        /* TLC page program */
	uint64_t t_prog_slc_ns;    /* SLC page program */
	uint64_t t_erase_ns;       /* block erase */
	uint64_t t_xfer_ns;        /* per-page transfer controller<->die */
	uint64_t t_ctrl_ns;        /* per-command controller time; commands pass the
				      controller one at a time, so this also caps
				      the device at 1/t_ctrl commands per second */

	/* background work */
	int idle_gc;               /* 1: background GC when idle */
	uint64_t idle_threshold_ns;/* host idle time before background work starts */
	double idle_gc_rate;       /* victim blocks reclaimed per second when idle */
	uint32_t idle_gc_target;   /* free blocks per die to reach; 0: auto */
};

struct ftl_geometry {          /* derived, read-only */
	uint32_t ndies;
	uint64_t phys_pages;       /* TLC pages (SLC cache is extra) */
	uint64_t user_pages;
	uint64_t user_bytes;
	uint64_t phys_bytes;
	uint64_t total_blocks;
	uint64_t slc_pages;
	double effective_op;       /* phys/user - 1 */
	double alpha_eff;          /* (phys - ndies*gc_low_wm blocks)/user: design estimate */
	double analytic_wa;        /* ftl_analytic_wa(alpha_eff) */
};

struct ftl_stats {
	/* since the last ftl_reset_stats (or creation) */
	uint64_t host_write_cmds, host_read_cmds, host_trim_cmds;
	uint64_t host_write_bytes, host_read_bytes;
	uint64_t host_prog_pages;      /* pages programmed on behalf of the host (SLC or TLC) */
	uint64_t nand_prog_pages;      /* all programs: host + GC + SLC fold */
	uint64_t nand_prog_pages_slc;
	uint64_t nand_prog_pages_tlc;
	uint64_t nand_read_pages;      /* host + RMW + GC + fold reads */
	uint64_t nand_write_bytes;     /* nand_prog_pages * page_size */
	double write_amplification;    /* nand_write_bytes / host_write_bytes (0 if none) */
	uint64_t gc_invocations;       /* victim blocks selected (fg + bg) */
	uint64_t gc_fg_blocks;         /* victims selected by foreground GC */
	uint64_t gc_bg_blocks;         /* blocks reclaimed by idle (background) GC */
	uint64_t gc_emergency;         /* synchronous whole-block passes, host waiting */
	uint64_t pages_relocated;      /* GC page moves */
	uint64_t blocks_erased;
	uint64_t slc_fold_pages;
	uint64_t trimmed_bytes;
	uint64_t formats;
	/*
	 * Ground truth for "GC started": set when the first foreground GC victim
	 * is selected after creation, the last ftl_format or ftl_reset_stats.
	 * gc_start_host_write_bytes is host_write_bytes at that moment (the
	 * bytes of every host write command before the one whose page triggered
	 * it); gc_start_ns the model time (the caller's clock) of that command.
	 * Both 0 while gc_started is 0.
	 */
	int gc_started;
	uint64_t gc_start_host_write_bytes;
	uint64_t gc_start_ns;
	/* current state */
	uint64_t free_blocks;
	uint64_t total_blocks;
	uint64_t valid_pages;          /* pages mapped (TLC + SLC) */
	uint64_t slc_used_bytes;       /* SLC cache occupancy (valid + not yet reclaimed) */
	uint64_t slc_valid_bytes;
	uint64_t slc_capacity_bytes;
	int idle_gc;                   /* current idle GC switch */
	/* wear (never reset) */
	uint64_t lifetime_erases;
	uint32_t erase_count_min, erase_count_max;
	double erase_count_mean;
	uint64_t lifetime_host_write_bytes;
	uint64_t lifetime_nand_write_bytes;
	/*
	 * Steady-state check, averaged over host TLC page programs since the
	 * last reset: erased (programmable) pages, valid TLC pages, the
	 * resulting physical/live ratio alpha = (phys - erased) / valid and
	 * ftl_analytic_wa(alpha).  0 when no samples.
	 */
	double avg_erased_pages, avg_valid_pages, alpha_measured, analytic_wa_measured;
	/* model clock */
	uint64_t last_now_ns;
	uint64_t max_die_busy_ns;      /* latest busy-until over all dies */
};

struct ftl;

/*
 * Fill cfg with the model defaults: 1 GiB user, 7 % OP, 4 x 2 dies, auto
 * pages per block, greedy GC, no SLC, tR 100 us, tPROG 200 us, tBERS 2 ms,
 * xfer 2 us, ctrl 5 us, idle GC after 500 ms at 100 blocks/s.  (The unit
 * tests' baseline; the daemon's profiles set their own values.)
 */
void ftl_config_default(struct ftl_config *cfg);

/* Create the model; on error returns NULL and writes a message to err. */
struct ftl *ftl_create(const struct ftl_config *cfg, char *err, size_t errlen);
void ftl_destroy(struct ftl *f);

/* Effective configuration (derived fields filled in) and geometry. */
const struct ftl_config *ftl_get_config(const struct ftl *f);
const struct ftl_geometry *ftl_get_geometry(const struct ftl *f);

/*
 * Page-granular host commands.  lba_page/npages in mapping units.  Returns
 * the completion time (>= now_ns).  Out-of-range requests return 0.
 * mapped (optional, npages bytes) receives 1 for each page that was mapped.
 */
uint64_t ftl_write(struct ftl *f, uint64_t lba_page, uint64_t npages, uint64_t now_ns);
uint64_t ftl_read(struct ftl *f, uint64_t lba_page, uint64_t npages, uint64_t now_ns,
		  uint8_t *mapped);
uint64_t ftl_trim(struct ftl *f, uint64_t lba_page, uint64_t npages, uint64_t now_ns);

/*
 * Byte-granular variants used by the daemon.  A write that covers a page
 * only partly is a read-modify-write of that page (a NAND read first if the
 * page is mapped).  Trim unmaps only the pages wholly inside the range.
 * host byte counters count len, not whole pages.
 */
uint64_t ftl_write_bytes(struct ftl *f, uint64_t off, uint64_t len, uint64_t now_ns);
uint64_t ftl_read_bytes(struct ftl *f, uint64_t off, uint64_t len, uint64_t now_ns);
uint64_t ftl_trim_bytes(struct ftl *f, uint64_t off, uint64_t len, uint64_t now_ns,
			uint64_t *first_page, uint64_t *npages);

/* Fresh-out-of-box: unmap everything, erase all written blocks (wear kept). */
uint64_t ftl_format(struct ftl *f, uint64_t now_ns);
/* Zero the since-reset counters (WA, GC, host bytes ...). */
void ftl_reset_stats(struct ftl *f);
/* Run background work (idle GC, SLC folding) that is due up to now_ns. */
void ftl_idle(struct ftl *f, uint64_t now_ns);
void ftl_set_idle_gc(struct ftl *f, int on);

int ftl_is_mapped(const struct ftl *f, uint64_t lba_page);
void ftl_stats(const struct ftl *f, struct ftl_stats *st);

/* Internal consistency check (L2P/P2L, valid counts, free pools); 0 if OK,
   else -1 and a message in err.  O(capacity): for tests and debugging. */
int ftl_check(const struct ftl *f, char *err, size_t errlen);

/* Free blocks on one die (tests). */
uint32_t ftl_die_free_blocks(const struct ftl *f, uint32_t die);

/*
 * Analytic steady-state WA of greedy GC under uniform random single-page
 * writes (Xiang & Kurkoski 2012; equals the large-block mean-field limit):
 *     WA = alpha / (alpha + W0(-alpha * exp(-alpha)))
 * alpha = physical / user pages (1 + OP).
 */
double ftl_analytic_wa(double alpha);
/* Principal branch of Lambert W for x in [-1/e, 0]. */
double ftl_lambert_w0(double x);

#ifdef __cplusplus
}
#endif
#endif
