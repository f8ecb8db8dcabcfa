#!/usr/bin/env bash
# rf3-compare.sh STATE ROUNDS DURATION BIN...: on the launcher cluster of
# STATE (bin/cassandra-launcher up -nodes 3 -state STATE), per round, per
# mode, per cqlseq binary (interleaved): migrate a fresh keyspace at RF 3,
# cqlseq bench 4 partitions x 16 clients, 1,000 workspaces, --json; prints
# one TSV line per run: binary mode round commands/s CQL-statements/command
# LWT/command nodes-core-ms/command cqlseq-core-ms/command p99-ms.
set -euo pipefail
state=$1 rounds=$2 dur=$3; shift 3
hosts=$(python3 -c "import json; d=json.load(open('$state')); print(','.join(n['host'] for n in d['nodes']))")
pids=$(python3 -c "import json; d=json.load(open('$state')); print(','.join(str(n['pid']) for n in d['nodes']))")
echo "# hosts $hosts pids $pids" >&2
for r in $(seq "$rounds"); do
  for mode in trust0 trust2 fenced; do
    for bin in "$@"; do
      ks=m_$(basename "$bin" | tr -c 'a-z0-9\n' '_')_${mode}_${r}_$$
      "$bin" migrate --hosts "$hosts" --keyspace "$ks" --replication "{'class': 'NetworkTopologyStrategy', 'datacenter1': 3}" >/dev/null
      j=$(mktemp)
      "$bin" bench --hosts "$hosts" --keyspace "$ks" --mode "$mode" --partitions 4 --concurrency 16 --workspaces 1000 \
        --duration "$dur" --no-progress --node-pids "$pids" --json "$j" >/dev/null
      python3 - "$j" "$(basename "$bin")" "$mode" "$r" <<'PY'
import json,sys
d=json.load(open(sys.argv[1])); c=d.get('cost') or {}
f=lambda k: ('%.2f'%c[k]) if c.get(k) is not None else '-'
print('\t'.join([sys.argv[2],sys.argv[3],sys.argv[4],'%.0f'%d['sequencer']['per_second'],f('cql_statements_per_command'),f('cql_conditional_statements_per_command'),f('node_cpu_ms_per_command'),f('client_cpu_ms_per_command'),'%.0f'%d['sequencer']['latency_ms']['p99']]),flush=True)
PY
      rm -f "$j"
    done
  done
done
