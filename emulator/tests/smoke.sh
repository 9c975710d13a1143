#!/usr/bin/env bash
# Smoke test of the emulated SSD, end to end through fio:
#   build, mount ssdlab-emu in a temporary directory, 4 KiB random writes from
#   FOB (libaio, direct=1, QD 32 x 2 jobs) with a per-second IOPS log showing
#   the burst and the fall to GC-bound steady state, fio verify=crc32c on a
#   small region, TRIM through a loop device (blkdiscard), stats, unmount.
#
# usage: emulator/tests/smoke.sh [RUNTIME_S]      (default 20)
# env:   SMOKE_SIZE (default 256M: FOB burst ~2 s, near steady state by 20 s), SMOKE_PROFILE (default enterprise-tlc),
#        SMOKE_OUT (directory for logs; default a temporary one, kept),
#        SMOKE_NO_LOOP=1 to skip the loop-device TRIM check.
# Needs root, /dev/fuse, fio, fusermount3.  Exits non-zero on failure.
set -euo pipefail

RUNTIME=${1:-20}
SIZE=${SMOKE_SIZE:-256M}
PROFILE=${SMOKE_PROFILE:-enterprise-tlc}
HERE=$(cd "$(dirname "$0")/.." && pwd)
EMU=$HERE/build/ssdlab-emu
OUT=${SMOKE_OUT:-$(mktemp -d /tmp/ssdlab-emu-smoke-out.XXXXXX)}
mkdir -p "$OUT"

say() { printf '== %s\n' "$*"; }
fail() { printf 'SMOKE FAIL: %s\n' "$*" >&2; exit 1; }

for tool in fio fusermount3; do
    command -v "$tool" >/dev/null || fail "$tool not installed"
done
[ "$(id -u)" = 0 ] || fail "run as root (FUSE mount, loop device)"

say "build"
make -C "$HERE" -s all >/dev/null

MNT=$(mktemp -d /tmp/ssdlab-emu-smoke.XXXXXX)
PIDF=$OUT/emu.pid
LOOP=""

cleanup() {
    set +e
    if [ -n "$LOOP" ]; then losetup -d "$LOOP"; fi
    if [ -f "$PIDF" ]; then kill -TERM "$(cat "$PIDF")" 2>/dev/null; fi
    for _ in $(seq 1 100); do
        grep -q " $MNT " /proc/mounts || break
        sleep 0.05
    done
    if grep -q " $MNT " /proc/mounts; then fusermount3 -u "$MNT" || umount -l "$MNT"; fi
    rmdir "$MNT" 2>/dev/null
}
trap cleanup EXIT

stat_get() { # stat_get GROUP KEY
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d[sys.argv[2]][sys.argv[3]])' \
        "$MNT/stats" "$1" "$2"
}

say "mount $PROFILE size=$SIZE on $MNT"
"$EMU" --profile "$PROFILE" --size "$SIZE" --pid-file "$PIDF" "$MNT"
grep -q " $MNT " /proc/mounts || fail "not mounted"
DISK=$MNT/disk
cp "$MNT/stats" "$OUT/stats-fob.json"

say "4 KiB random write from FOB, ${RUNTIME}s, libaio QD 32 x 2 jobs"
( cd "$OUT" && fio --name=fob --filename="$DISK" --rw=randwrite --bs=4k --direct=1 \
    --ioengine=libaio --iodepth=32 --numjobs=2 --group_reporting --time_based \
    --runtime="$RUNTIME" --norandommap --randrepeat=0 \
    --write_iops_log=fob --log_avg_msec=1000 --output="$OUT/fio-fob.txt" )
grep -E "IOPS=|clat \(usec\)" "$OUT/fio-fob.txt" | sed 's/^/   /'
# sum the per-job logs per second: "second iops"
cat "$OUT"/fob_iops.*.log | awk -F', *' '{s=int(($1+500)/1000); a[s]+=$2; if (s>m) m=s}
    END {for (i=1;i<=m;i++) if (i in a) print i, a[i]}' > "$OUT/iops-per-second.txt"
echo "   second  IOPS"
awk '{printf "   %6d  %6d\n", $1, $2}' "$OUT/iops-per-second.txt"
python3 - "$OUT/iops-per-second.txt" <<'EOF'
import sys
rows = [tuple(map(int, l.split())) for l in open(sys.argv[1]) if l.strip()]
iops = [r[1] for r in rows]
if len(iops) < 8:
    sys.exit("SMOKE FAIL: too few IOPS samples: %d" % len(iops))
burst = max(iops[:3])
steady = sum(iops[-4:]) / 4
print("   FOB burst (best of first 3 s) %.0f IOPS, last 4 s %.0f IOPS, ratio %.1f" % (burst, steady, burst / max(steady, 1)))
if not burst > 3 * steady:
    sys.exit("SMOKE FAIL: no write cliff (burst %.0f vs steady %.0f)" % (burst, steady))
EOF
cp "$MNT/stats" "$OUT/stats-after-randwrite.json"
echo "   WA $(stat_get counters write_amplification), GC victims $(stat_get counters gc_invocations)," \
     "pages relocated $(stat_get counters pages_relocated), max in flight $(stat_get counters max_inflight)," \
     "mean in flight at arrival $(stat_get counters mean_inflight_at_arrival)"

say "data integrity: fio verify=crc32c on 32 MiB"
( cd "$OUT" && fio --name=verify --filename="$DISK" --rw=randwrite --bs=4k --direct=1 \
    --ioengine=libaio --iodepth=16 --offset=64M --size=32M --verify=crc32c --do_verify=1 \
    --verify_fatal=1 --verify_state_save=0 --output="$OUT/fio-verify.txt" ) || fail "fio verify failed"
grep -qE "err= *0" "$OUT/fio-verify.txt" || fail "fio verify reported errors"
echo "   verify ok ($(grep -oE 'IOPS=[^,]+' "$OUT/fio-verify.txt" | head -2 | tr '\n' ' '))"

if [ "${SMOKE_NO_LOOP:-0}" != 1 ] && command -v losetup >/dev/null && command -v blkdiscard >/dev/null; then
    say "TRIM through a loop device (blkdiscard -> fallocate(PUNCH_HOLE))"
    before=$(stat_get counters trimmed_bytes)
    LOOP=$(losetup -f --show --direct-io=on "$DISK")
    blkdiscard -o 64M -l 16M "$LOOP"
    after=$(stat_get counters trimmed_bytes)
    nz=$(dd if="$LOOP" bs=1M skip=64 count=16 iflag=direct status=none | tr -d '\0' | wc -c)
    losetup -d "$LOOP"; LOOP=""
    echo "   trimmed_bytes $before -> $after, non-zero bytes in the discarded range: $nz"
    [ "$((after - before))" -ge $((16 << 20)) ] || fail "discard did not reach the FTL"
    [ "$nz" = 0 ] || fail "discarded range does not read as zeros"
fi

say "control: format"
echo format > "$MNT/control"
[ "$(stat_get state valid_pages)" = 0 ] || fail "valid pages after format"
cp "$MNT/stats" "$OUT/stats-final.json"

say "unmount"
kill -TERM "$(cat "$PIDF")"
for _ in $(seq 1 100); do grep -q " $MNT " /proc/mounts || break; sleep 0.05; done
grep -q " $MNT " /proc/mounts && fail "still mounted after SIGTERM"
echo "   logs in $OUT"
echo "SMOKE OK"
