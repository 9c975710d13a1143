#!/usr/bin/env bash
# Measure the emulator's own ceiling and the modelled devices through fio.
#   emulator/tests/bench.sh [RUNTIME_S]     (default 10 s per point)
# Prints one line per measurement; raw fio output in $BENCH_OUT (default a
# temporary directory).  Needs root, /dev/fuse, fio.  Results depend on the
# machine and on whatever else runs on it: re-run on a quiet machine.
set -euo pipefail
RT=${1:-10}
HERE=$(cd "$(dirname "$0")/.." && pwd)
EMU=$HERE/build/ssdlab-emu
OUT=${BENCH_OUT:-$(mktemp -d /tmp/ssdlab-emu-bench.XXXXXX)}
mkdir -p "$OUT"
make -C "$HERE" -s all >/dev/null
MNT=$(mktemp -d /tmp/ssdlab-emu-bench-mnt.XXXXXX)
PIDF=$OUT/emu.pid

stop() {
    [ -f "$PIDF" ] && kill -TERM "$(cat "$PIDF")" 2>/dev/null || true
    for _ in $(seq 1 100); do grep -q " $MNT " /proc/mounts || break; sleep 0.05; done
    if grep -q " $MNT " /proc/mounts; then fusermount3 -u "$MNT" || umount -l "$MNT"; fi
}
trap 'stop; rmdir "$MNT" 2>/dev/null || true' EXIT

start() { "$EMU" --pid-file "$PIDF" "$@" "$MNT"; }

# fio NAME RW BS QD JOBS [extra...] -> prints "IOPS MB/s mean-lat-us p99-lat-us"
run() {
    local name=$1 rw=$2 bs=$3 qd=$4 jobs=$5; shift 5
    fio --name="$name" --filename="$MNT/disk" --rw="$rw" --bs="$bs" --direct=1 \
        --ioengine=libaio --iodepth="$qd" --numjobs="$jobs" --group_reporting \
        --time_based --runtime="$RT" --norandommap --randrepeat=0 \
        --output-format=json --output="$OUT/$name.json" "$@" >/dev/null
    python3 - "$OUT/$name.json" "$rw" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
d = j["read"] if "read" in sys.argv[2] else j["write"]
lat = d["lat_ns"]
p99 = d.get("clat_ns", {}).get("percentile", {}).get("99.000000", 0) / 1e3
print("%8.0f IOPS %7.1f MB/s  lat mean %7.0f us  p99 %7.0f us" %
      (d["iops"], d["bw_bytes"] / 1e6, lat["mean"] / 1e3, p99))
EOF
}

fill() { fio --name=fill --filename="$MNT/disk" --rw=write --bs=1M --direct=1 \
         --ioengine=libaio --iodepth=8 --output=/dev/null; }

echo "== ceiling: --zero-latency, 1 GiB ($(nproc) CPUs, $(date -u +%FT%TZ))"
start --zero-latency
fill
printf '%-40s %s\n' "4k randread  QD32 x2 jobs" "$(run ceil-rr randread 4k 32 2)"
printf '%-40s %s\n' "4k randwrite QD32 x2 jobs" "$(run ceil-rw randwrite 4k 32 2)"
printf '%-40s %s\n' "4k randread  QD1" "$(run ceil-rr1 randread 4k 1 1)"
printf '%-40s %s\n' "128k seq write QD8" "$(run ceil-sw write 128k 8 1)"
stop

for prof in enterprise-tlc client-slc max-op; do
    echo "== $prof, 1 GiB"
    start --profile "$prof"
    printf '%-40s %s\n' "4k randwrite QD32 x2 from FOB" "$(run "$prof-fob" randwrite 4k 32 2)"
    printf '%-40s %s\n' "4k randread  QD32 x2" "$(run "$prof-rr" randread 4k 32 2)"
    printf '%-40s %s\n' "4k randread  QD1" "$(run "$prof-rr1" randread 4k 1 1)"
    printf '%-40s %s\n' "4k randwrite QD1" "$(run "$prof-rw1" randwrite 4k 1 1)"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=d["counters"]; print("   stats: WA %.2f, GC victims %d, max in flight %d" % (c["write_amplification"], c["gc_invocations"], c["max_inflight"]))' "$MNT/stats"
    stop
done
echo "raw results in $OUT"
