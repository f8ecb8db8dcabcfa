#!/usr/bin/env bash
# scripts/sizing.sh: bytes on disk per event, per workspace and per partition in each mode, on a
# real Cassandra node (issue 50; docs/operations.md, Sizing). `make sizing` runs it.
#
# For each mode it fills four fresh keyspaces with `cqlseq bench` (--payload 100, 1,000 or 10,000
# workspaces, 4 or 256 partitions), then stops the node cleanly (SIGTERM: the shutdown hook flushes
# every memtable to sstables; JMX is off on launcher nodes, so no nodetool flush), starts it again, waits
# until no compaction runs, and prints per keyspace the bytes of the files of its table directory,
# the Data.db bytes and the uncompressed data bytes (from CompressionInfo.db), with the commands each
# bench acknowledged; then, per mode run with all four runs, the bytes per event, workspace and
# partition derived from them as docs/operations.md (Sizing) says.
#
# With STATE naming a running launcher node (one node), the script uses it, and stops it (SIGTERM)
# and starts it again to flush: use a node of your own.
#
#   STATE    launcher state file (default .cache/sizing.state.json); when it does not exist the
#            script starts its own node with it (NODE_HEAP, default 512m) and always stops it
#   MODES    modes (default "trust0 trust1 trust2 fenced")
#   RUNS     the runs per mode (default "s l w p": short, long, 10,000 workspaces, 256 partitions)
#   CONC     clients per partition (default 32)
#   SECS     "short long" run seconds per mode, e.g. SECS_trust2="10 30" (defaults below)
#   MEASURE_ONLY=1  no bench runs: restart and measure the keyspaces of an earlier run
#   OUT      directory of the bench JSON reports and sizing.tsv (default .cache/sizing)
#
# Needs bin/cqlseq, bin/cassandra-launcher, jq, python3, and cqlsh in .venv (make cqlsh-venv).
set -euo pipefail
cd "$(dirname "$0")/.."

STATE=${STATE:-.cache/sizing.state.json}
MODES=${MODES:-"trust0 trust1 trust2 fenced"}
RUNS=${RUNS:-"s l w p"}
CONC=${CONC:-32}
OUT=${OUT:-.cache/sizing}
NODE_HEAP=${NODE_HEAP:-512m}
PAYLOAD=100
# Run seconds (short, long) per mode: 30,000-280,000 commands each on a loaded 2-core machine;
# the wide run (10,000 workspaces) lasts the short time.
SECS_trust0=${SECS_trust0:-"30 90"}
SECS_trust1=${SECS_trust1:-"20 60"}
SECS_trust2=${SECS_trust2:-"10 30"}
SECS_fenced=${SECS_fenced:-"20 60"}

LAUNCHER=bin/cassandra-launcher
CQLSEQ=bin/cqlseq
CQLSH=.venv/bin/cqlsh
mkdir -p "$OUT" "$(dirname "$STATE")"

own=""
if [ ! -f "$STATE" ]; then
	own=1
	$LAUNCHER up -nodes 1 -heap "$NODE_HEAP" -timeout 600s -state "$STATE"
fi
cleanup() { if [ -n "$own" ]; then $LAUNCHER down -state "$STATE" || true; fi; }
trap cleanup EXIT

host=$(jq -r .host "$STATE")
dir=$(jq -r .dir "$STATE")
cql() { $CQLSH "${host%:*}" "${host##*:}" --request-timeout 60 -e "$1"; }

bench() { # keyspace mode partitions workspaces seconds
	$CQLSEQ migrate --hosts "$host" --keyspace "$1" >/dev/null
	$CQLSEQ bench --hosts "$host" --keyspace "$1" --mode "$2" --partitions "$3" --workspaces "$4" \
		--concurrency "$CONC" --payload $PAYLOAD --duration "$5s" --no-progress --json "$OUT/$1.json" |
		grep -E '^(cqlseq bench|sequencer)'
}

kss=()
for m in $MODES; do
	v="SECS_$m"
	read -r short long <<<"${!v}"
	for r in $RUNS; do
		kss+=("sizing_${m}_$r")
		[ -n "${MEASURE_ONLY:-}" ] && continue
		case $r in
		s) bench "sizing_${m}_s" "$m" 4 1000 "$short" ;;      # short: 1,000 workspaces
		l) bench "sizing_${m}_l" "$m" 4 1000 "$long" ;;       # long: the per-event slope
		w) bench "sizing_${m}_w" "$m" 4 10000 "$short" ;;     # wide: 10,000 workspaces
		p) CONC=1 bench "sizing_${m}_p" "$m" 256 256 0.5 ;;   # 256 partitions, few events
		*) echo "sizing: unknown run $r" >&2; exit 2 ;;
		esac
	done
done

# A clean stop flushes every memtable, the schema's included (SIGTERM: Cassandra's shutdown hook
# drains); then the launcher starts the node again in the same directory (`restart` of a node whose
# process has ended only starts it). Not a SIGKILL restart: a launcher node without -crash-safe
# does not flush schema changes, and a first attempt that way lost every keyspace it created.
pid=$(jq -r .pid "$STATE")
kill -TERM "$pid"
for i in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
$LAUNCHER restart -state "$STATE"
for i in $(seq 1 120); do
	n=$(cql "SELECT count(*) FROM system_views.sstable_tasks" | awk '/^ *[0-9]+ *$/{print $1; exit}')
	[ "$n" = 0 ] && break
	sleep 5
done

for ks in "${kss[@]}"; do # a keyspace lost with the restart would measure as nothing
	cql "DESCRIBE KEYSPACE $ks" >/dev/null || { echo "sizing: keyspace $ks missing after the restart" >&2; exit 1; }
done

printf 'keyspace\tmode\tpartitions\tworkspaces\tcommands\tsstables\tdir_bytes\tdata_bytes\tuncompressed_bytes\n' | tee "$OUT/sizing.tsv"
for ks in "${kss[@]}"; do
	t=$(ls -d "$dir/data/$ks"/values-*)
	python3 - "$ks" "$t" "$OUT/$ks.json" <<'EOF' | tee -a "$OUT/sizing.tsv"
import glob, json, os, struct, sys
ks, t, rep = sys.argv[1:]
r = json.load(open(rep))
def compressed_info(path):
    # CompressionInfo.db: writeUTF(compressor), int options (UTF key, UTF value each),
    # int chunk length, int max compressed length, long uncompressed data length, ...
    b = open(path, "rb").read()
    o = 2 + struct.unpack(">H", b[:2])[0]
    (n,) = struct.unpack(">i", b[o:o+4]); o += 4
    for _ in range(2 * n):
        o += 2 + struct.unpack(">H", b[o:o+2])[0]
    o += 8
    return struct.unpack(">q", b[o:o+8])[0]
files = [f for f in glob.glob(os.path.join(t, "**", "*"), recursive=True)
         if os.path.isfile(f) and "/snapshots/" not in f and "/backups/" not in f]
data = [f for f in files if f.endswith("-Data.db")]
dirb = sum(os.path.getsize(f) for f in files)
datab = sum(os.path.getsize(f) for f in data)
unc = sum(compressed_info(f[:-len("Data.db")] + "CompressionInfo.db") for f in data)
print("\t".join(str(x) for x in [ks, r["mode"], r["partitions"], r["workspaces"],
      r["sequencer"]["commands"], len(data), dirb, datab, unc]))
EOF
done
# Lightweight transactions keep their Paxos state in system.paxos, shared by every keyspace.
echo "# system.paxos: $(du -sb "$dir"/data/system/paxos-* | awk '{s+=$1} END {print s}') bytes" | tee -a "$OUT/sizing.tsv"

# Per event: the slope from s to l; per workspace: w against s, less its extra events, over the
# workspaces written (a command picks one of its partition's at random); per partition: the whole
# p keyspace / 256 (an upper bound). "unc": Data.db's uncompressed length + the other files.
python3 - "$OUT/sizing.tsv" <<'EOF' | tee -a "$OUT/sizing.tsv"
import math, sys
rows = {}
for line in open(sys.argv[1]):
    if line.startswith(("keyspace", "#")):
        continue
    ks, mode, P, W, E, n, d, da, u = line.rstrip("\n").split("\t")
    rows[ks] = {"E": int(E), "W": int(W), "disk": int(d), "unc": int(u) + int(d) - int(da)}
written = lambda r: r["W"] * (1 - math.exp(-r["E"] / r["W"]))
print("# mode\tevent_disk\tevent_unc\tws_disk\tws_unc\tpart_disk_max\tMiB_per_1M_disk\tMiB_per_1M_unc")
for m in ["trust0", "trust1", "trust2", "fenced"]:
    try:
        s, l, w, p = (rows[f"sizing_{m}_{k}"] for k in "slwp")
    except KeyError:
        continue
    ev = {k: (l[k] - s[k]) / (l["E"] - s["E"]) for k in ("disk", "unc")}
    ws = {k: (w[k] - s[k] - ev[k] * (w["E"] - s["E"])) / (written(w) - written(s)) for k in ("disk", "unc")}
    print("\t".join(["# " + m] + ["%.1f" % x for x in (ev["disk"], ev["unc"], ws["disk"], ws["unc"], p["disk"] / 256,
          ev["disk"] * 1e6 / 2**20, ev["unc"] * 1e6 / 2**20)]))
EOF
