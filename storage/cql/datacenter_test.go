package cql

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/storage"
)

// newDCHost is fake host i in data centre dc.
func newDCHost(i int, dc string) *gocql.HostInfo {
	hi := gocql.HostInfoBuilder{
		HostId:         "00000000-0000-0000-0000-00000000001" + string(rune('0'+i)),
		ConnectAddress: net.IPv4(127, 0, 1, byte(i)),
		Port:           9042,
		DataCenter:     dc,
	}.Build()
	return &hi
}

func TestCheckDataCentres(t *testing.T) {
	one := []*gocql.HostInfo{newDCHost(1, "dc1"), newDCHost(2, "dc1"), newDCHost(3, "dc1")}
	two := []*gocql.HostInfo{newDCHost(1, "dc1"), newDCHost(2, "dc2"), newDCHost(3, "dc1")}
	tests := []struct {
		name    string
		hosts   []*gocql.HostInfo
		localDC string
		cons    gocql.Consistency
		serial  gocql.Consistency
		werr    []string // substrings; nil: no error
	}{
		{"single DC, LOCAL_*, no LocalDC", one, "", gocql.LocalQuorum, gocql.LocalSerial, nil},
		{"single DC, LocalDC", one, "dc1", gocql.LocalQuorum, gocql.LocalSerial, nil},
		{"no DC known, no LocalDC", []*gocql.HostInfo{newDCHost(1, "")}, "", gocql.LocalQuorum, gocql.LocalSerial, nil},
		{"multi-DC, LOCAL_QUORUM, no LocalDC", two, "", gocql.LocalQuorum, gocql.Serial, []string{"dc1, dc2", "LOCAL_QUORUM", "set LocalDC", "--cql-local-dc"}},
		{"multi-DC, LOCAL_ONE, no LocalDC", two, "", gocql.LocalOne, gocql.Serial, []string{"LOCAL_ONE", "set LocalDC"}},
		{"multi-DC, LOCAL_SERIAL, no LocalDC", two, "", gocql.Quorum, gocql.LocalSerial, []string{"LOCAL_SERIAL", "set LocalDC"}},
		{"multi-DC, QUORUM and SERIAL, no LocalDC", two, "", gocql.Quorum, gocql.Serial, nil},
		{"multi-DC, LocalDC", two, "dc2", gocql.LocalQuorum, gocql.LocalSerial, nil},
		{"LocalDC unknown", two, "dc3", gocql.LocalQuorum, gocql.LocalSerial, []string{`LocalDC "dc3"`, "--cql-local-dc", "dc1, dc2"}},
		{"LocalDC, no DC known", []*gocql.HostInfo{newDCHost(1, "")}, "dc1", gocql.LocalQuorum, gocql.LocalSerial, []string{"no data centre"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkDataCentres(tt.hosts, tt.localDC, tt.cons, tt.serial)
			if tt.werr == nil {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, storage.ErrInvalidArgument)
			assert.Contains(t, err.Error(), "cql: ")
			for _, w := range tt.werr {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// planOf returns every host of one plan of p for a statement without a
// routing key (the token-aware policy's fallback order).
func planOf(p gocql.HostSelectionPolicy) []*gocql.HostInfo {
	var out []*gocql.HostInfo
	next := p.Pick(nil)
	for sh := next(); sh != nil; sh = next() {
		out = append(out, sh.Info())
	}
	return out
}

func TestLocalDCRoutesLocalHostsFirst(t *testing.T) {
	a1, b1, c2 := newDCHost(1, "dc1"), newDCHost(2, "dc1"), newDCHost(3, "dc2")
	policy := func(f *healthFixture, o Options) healthPolicy {
		o.EnsureDefaults()
		p := healthPolicy{HostSelectionPolicy: hostPolicy(&o), h: f.h}
		p.Init(&gocql.Session{}) // a session that is never used: no keyspace, no partitioner
		for _, hi := range []*gocql.HostInfo{c2, a1, b1} {
			p.AddHost(hi)
		}
		return p
	}

	// LOCAL_QUORUM / LOCAL_SERIAL (the defaults): dc1's hosts only.
	f := newHealthFixture(t, nil)
	local := policy(f, Options{LocalDC: "dc1"})
	for range 4 { // round robin: either local host may come first
		assert.ElementsMatch(t, []*gocql.HostInfo{a1, b1}, planOf(local))
	}
	// QUORUM / SERIAL: dc1's hosts, then the other data centre's.
	global := policy(f, Options{LocalDC: "dc1", Consistency: gocql.Quorum, SerialConsistency: gocql.Serial})
	for range 4 {
		plan := planOf(global)
		require.Len(t, plan, 3)
		assert.ElementsMatch(t, []*gocql.HostInfo{a1, b1}, plan[:2])
		assert.Equal(t, c2, plan[2])
	}

	// Health ordering still applies: a suspected local host goes last.
	f.reply(b1, time.Millisecond)
	f.reply(c2, time.Millisecond)
	f.h.observe(context.Background(), a1, f.clk.now().Add(-time.Second), f.clk.now(), gocql.ErrTimeoutNoResponse)
	for range 4 {
		assert.Equal(t, []*gocql.HostInfo{b1, a1}, planOf(local))
		assert.Equal(t, []*gocql.HostInfo{b1, c2, a1}, planOf(global))
	}

	// Without LocalDC: token aware over round robin, every host.
	all := policy(newHealthFixture(t, nil), Options{})
	assert.ElementsMatch(t, []*gocql.HostInfo{a1, b1, c2}, planOf(all))
}

func TestClusterConfigWithLocalDC(t *testing.T) {
	c, err := ClusterConfig(Options{Hosts: []string{"127.0.0.1:1"}, LocalDC: "dc1"})
	require.NoError(t, err)
	require.IsType(t, healthPolicy{}, c.PoolConfig.HostSelectionPolicy)
	assert.True(t, c.PoolConfig.HostSelectionPolicy.IsLocal(newDCHost(1, "dc1")))
	assert.False(t, c.PoolConfig.HostSelectionPolicy.IsLocal(newDCHost(2, "dc2")))

	c, err = ClusterConfig(Options{Hosts: []string{"127.0.0.1:1"}, LocalDC: "dc1", DisableHealth: true})
	require.NoError(t, err)
	require.NotNil(t, c.PoolConfig.HostSelectionPolicy, "DC aware without health too")
	assert.False(t, c.PoolConfig.HostSelectionPolicy.IsLocal(newDCHost(2, "dc2")))

	_, err = Open(context.Background(), Options{Session: &gocql.Session{}, Keyspace: "ks", LocalDC: "dc1"})
	require.ErrorIs(t, err, storage.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "LocalDC")
}
