package schema

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/storage/cql"
)

func TestLexRoundTrip(t *testing.T) {
	src := "-- c1\nCREATE TABLE x.y (a int /* ; */, b text) // z;\nWITH comment = 'it''s; fine' AND x = $$a;b$$;\nSELECT \"Q;\"\"x\" FROM t WHERE a = -1.5;"
	toks, err := lex(src)
	require.NoError(t, err)
	var b strings.Builder
	for _, tk := range toks {
		b.WriteString(tk.text)
	}
	assert.Equal(t, src, b.String(), "tokens concatenate to the source")
	stmts := splitStatements(toks)
	require.Len(t, stmts, 2, "semicolons in comments, strings and quoted names do not split")
	assert.Equal(t, "CREATE TABLE x.y (a int , b text) WITH comment = 'it''s; fine' AND x = $$a;b$$", render(stmts[0]))
	assert.Equal(t, `SELECT "Q;""x" FROM t WHERE a = -1.5`, render(stmts[1]))
}

func TestLexErrors(t *testing.T) {
	for _, src := range []string{"SELECT 'abc", `SELECT "abc`, "/* open", "x = $$abc"} {
		_, err := lex(src)
		assert.Error(t, err, src)
	}
}

func TestEmbeddedScripts(t *testing.T) {
	for _, engine := range []string{EngineCassandra, EngineScylla} {
		t.Run(engine, func(t *testing.T) {
			scripts, err := Scripts(engine)
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(scripts), 3)
			for i, sc := range scripts {
				assert.Equal(t, i, sc.Version)
			}
			assert.Equal(t, "0000_keyspace.cql", scripts[0].Name)
			ks := scripts[0].Statements("ks1", "{'class': 'NetworkTopologyStrategy', 'dc1': '3'}")
			require.Len(t, ks, 1)
			want := "CREATE KEYSPACE IF NOT EXISTS ks1 WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': '3'}"
			if engine == EngineScylla {
				want += " AND tablets = {'enabled': false}"
			}
			assert.Equal(t, want, ks[0])
			assert.Equal(t,
				[]string{"CREATE TABLE IF NOT EXISTS ks1.schema_version ( version int, script text, checksum text, applied_at timestamp, PRIMARY KEY (version) )"},
				scripts[1].Statements("ks1", DefaultReplication))
			assert.Equal(t,
				[]string{"CREATE TABLE IF NOT EXISTS ks1.values ( p_key blob, c_col blob, value blob, PRIMARY KEY ((p_key), c_col) ) WITH CLUSTERING ORDER BY (c_col ASC)"},
				scripts[2].Statements("ks1", DefaultReplication))
		})
	}
	_, err := Scripts("postgres")
	assert.Error(t, err)
}

// TestReleasedChecksums pins the released scripts: keyspaces record these
// checksums, so editing a released script breaks every migrated keyspace.
// Add a new script instead.
func TestReleasedChecksums(t *testing.T) {
	want := map[int]string{
		1: "1eaf0ec772d27f049a1dabf38c1f562dcb842958f4e2ca2f40c1080713e66d57",
		2: "3f7fb1c4d070a16f1c718e916c86b7946087dcf1ec1e65fce44c4aa483f525cb",
		3: "df0259e8e9e72522a83437a3bb77321861c843f1bd44765218aafac92e2cddc2",
	}
	scripts, err := Scripts(EngineCassandra)
	require.NoError(t, err)
	for v, sum := range want {
		assert.Equal(t, sum, scripts[v].Checksum, "script %s", scripts[v].Path)
	}
	sc, err := Scripts(EngineScylla)
	require.NoError(t, err)
	for v := 1; v < len(sc); v++ {
		assert.Equal(t, scripts[v].Checksum, sc[v].Checksum, "migrations after 0 are shared by the engines")
	}
}

func TestLoadScriptsChecks(t *testing.T) {
	ks := "CREATE KEYSPACE IF NOT EXISTS cqlseq WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1};"
	tbl := "CREATE TABLE IF NOT EXISTS cqlseq.t (k int PRIMARY KEY);"
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name string
		fs   fstest.MapFS
		werr string // "" for no error
	}{
		{"ok", fstest.MapFS{"d/0000_ks.cql": file(ks), "d/0001_t.cql": file(tbl), "d/scylla/0000_ks.cql": file(ks)}, ""},
		{"gap", fstest.MapFS{"d/0000_ks.cql": file(ks), "d/0002_t.cql": file(tbl)}, "without gaps"},
		{"repeat", fstest.MapFS{"d/0000_ks.cql": file(ks), "d/0001_a.cql": file(tbl), "d/0001_b.cql": file(tbl)}, "without gaps"},
		{"no keyspace script", fstest.MapFS{"d/0001_t.cql": file(tbl)}, "without gaps"},
		{"bad name", fstest.MapFS{"d/0000_ks.cql": file(ks), "d/1_T.cql": file(tbl)}, "does not match"},
		{"script 0 not keyspace", fstest.MapFS{"d/0000_ks.cql": file(tbl)}, "script 0 must be"},
		{"script 0 two statements", fstest.MapFS{"d/0000_ks.cql": file(ks + tbl)}, "script 0 must be"},
		{"script 0 no replication", fstest.MapFS{"d/0000_ks.cql": file("CREATE KEYSPACE cqlseq WITH durable_writes = true;")}, "no replication"},
		{"keyspace DDL later", fstest.MapFS{"d/0000_ks.cql": file(ks), "d/0001_t.cql": file("DROP KEYSPACE cqlseq;")}, "only script 0"},
		{"empty script", fstest.MapFS{"d/0000_ks.cql": file(ks), "d/0001_t.cql": file("-- nothing\n;")}, "no statement"},
		{"unterminated", fstest.MapFS{"d/0000_ks.cql": file(ks), "d/0001_t.cql": file("CREATE TABLE 'x")}, "unterminated"},
		{"orphan override", fstest.MapFS{"d/0000_ks.cql": file(ks), "d/scylla/0001_t.cql": file(tbl)}, "overrides no script"},
		{"unknown engine folder", fstest.MapFS{"d/0000_ks.cql": file(ks), "d/mysql/0000_ks.cql": file(ks)}, "is not an engine"},
		{"empty", fstest.MapFS{"d/README": file("x")}, "no scripts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadScripts(tt.fs, "d", EngineScylla)
			if tt.werr == "" {
				assert.NoError(t, err)
				return
			}
			if assert.Error(t, err) {
				assert.Contains(t, err.Error(), tt.werr)
			}
		})
	}
}

func TestEngineOverride(t *testing.T) {
	fs := fstest.MapFS{
		"d/0000_ks.cql":        {Data: []byte("CREATE KEYSPACE cqlseq WITH replication = {'class': 'X'};")},
		"d/scylla/0000_ks.cql": {Data: []byte("CREATE KEYSPACE cqlseq WITH replication = {'class': 'X'} AND tablets = {'enabled': false};")},
	}
	c, err := loadScripts(fs, "d", EngineCassandra)
	require.NoError(t, err)
	s, err := loadScripts(fs, "d", EngineScylla)
	require.NoError(t, err)
	assert.Equal(t, "d/0000_ks.cql", c[0].Path)
	assert.Equal(t, "d/scylla/0000_ks.cql", s[0].Path)
	assert.NotEqual(t, c[0].Checksum, s[0].Checksum)
}

func TestSubstitution(t *testing.T) {
	src := "-- cqlseq in a comment stays\nCREATE KEYSPACE IF NOT EXISTS CQLSEQ WITH replication = { 'class' : 'SimpleStrategy' , 'replication_factor' : 1 } AND durable_writes = true;"
	sc, err := parseScript(0, "0000_ks.cql", "d/0000_ks.cql", []byte(src))
	require.NoError(t, err)
	got := sc.Statements("other_ks", "{'class': 'NetworkTopologyStrategy', 'dc1': '3'}")
	assert.Equal(t, []string{"CREATE KEYSPACE IF NOT EXISTS other_ks WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': '3'} AND durable_writes = true"}, got)

	src = "CREATE TABLE cqlseq.t (cqlseq_id int PRIMARY KEY, \"cqlseq\" text) WITH comment = 'cqlseq';"
	sc, err = parseScript(1, "0001_t.cql", "d/0001_t.cql", []byte(src))
	require.NoError(t, err)
	assert.Equal(t, []string{"CREATE TABLE ks.t (cqlseq_id int PRIMARY KEY, \"cqlseq\" text) WITH comment = 'cqlseq'"},
		sc.Statements("ks", DefaultReplication), "only the unquoted whole word is the keyspace")
}

func TestNormalizeReplication(t *testing.T) {
	good := map[string]string{
		DefaultReplication: DefaultReplication,
		"{'class':'NetworkTopologyStrategy','dc-1':3,'dc_2':'2'}":                                "{'class': 'NetworkTopologyStrategy', 'dc-1': 3, 'dc_2': '2'}",
		" { 'class' : 'org.apache.cassandra.locator.SimpleStrategy', 'replication_factor': 3 } ": "{'class': 'org.apache.cassandra.locator.SimpleStrategy', 'replication_factor': 3}",
	}
	for in, want := range good {
		got, err := normalizeReplication(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got)
		}
	}
	for _, bad := range []string{
		"", "{}", "{'replication_factor': 1}", "SimpleStrategy",
		"{'class': 'SimpleStrategy'", "{'class': 'SimpleStrategy',}", "{'class': 'SimpleStrategy',, 'a': 1}",
		"{'class': 'Simple Strategy'}", "{'class': 'x'}; DROP KEYSPACE k", "{'class': 'x', 'class': 'y'}",
		"{'class': 'x', 'dc1': -1}", "{'class': 'x', 'dc1': 1.5}", "{'class': 'x' /* c */}",
		"{'class': 'it''s'}", "{'class': x}", "{'class': 'x', 'a': {'b': 1}}",
	} {
		_, err := normalizeReplication(bad)
		assert.Error(t, err, bad)
	}
}

func TestOptionsValidate(t *testing.T) {
	o := Options{Keyspace: "ks"}
	o.EnsureDefaults()
	require.NoError(t, o.Validate())
	assert.Equal(t, DefaultReplication, o.Replication)
	assert.Equal(t, EngineCassandra, o.Engine)

	for _, name := range []string{"", "1ks", "_ks", "ks-1", "ks.t", "ks;DROP", strings.Repeat("k", 49), "kś"} {
		o := Options{Keyspace: name}
		o.EnsureDefaults()
		assert.ErrorIs(t, o.Validate(), ErrInvalidOptions, "%q", name)
	}
	assert.True(t, cql.ValidName(strings.Repeat("k", 48)))

	bad := Options{Keyspace: "x y", Replication: "{}", Engine: "oracle"}
	err := bad.Validate()
	require.ErrorIs(t, err, ErrInvalidOptions)
	for _, w := range []string{"keyspace name", "replication", "engine"} {
		assert.Contains(t, err.Error(), w, "every problem at once")
	}
}

func TestApplyRejectsBeforeAnyQuery(t *testing.T) {
	// A nil session would panic on any query: invalid options must be
	// reported first.
	_, err := Apply(context.Background(), nil, Options{Keyspace: "bad name"})
	assert.ErrorIs(t, err, ErrInvalidOptions)
	_, err = Apply(context.Background(), nil, Options{Keyspace: "ok"})
	assert.ErrorIs(t, err, ErrInvalidOptions, "nil session")
}

func TestAddedColumn(t *testing.T) {
	ks, tbl, col, ok := addedColumn("ALTER TABLE Ks1.values ADD w blob")
	require.True(t, ok)
	assert.Equal(t, []string{"ks1", "values", "w"}, []string{ks, tbl, col})
	for _, st := range []string{"ALTER TABLE ks.values DROP w", "CREATE TABLE ks.t (a int PRIMARY KEY)", "ALTER TABLE values ADD w blob", "ALTER TABLE ks.t ADD"} {
		_, _, _, ok := addedColumn(st)
		assert.False(t, ok, st)
	}
}

func TestReplicationFits(t *testing.T) {
	one := map[string]int{"datacenter1": 1}
	three := map[string]int{"datacenter1": 3}
	for _, tc := range []struct {
		repl string
		dcs  map[string]int
		want []string // substrings of the error; nil: fits
	}{
		{DefaultReplication, one, nil},
		{"{'class': 'SimpleStrategy', 'replication_factor': 3}", one, []string{"replication_factor 3", "1 nodes", "datacenter1 (1 node)"}},
		{"{'class': 'NetworkTopologyStrategy', 'dc1': 3}", three, []string{`datacenter "dc1" does not exist`, "datacenter1 (3 nodes)"}},
		{"{'class': 'NetworkTopologyStrategy', 'datacenter1': 3}", one, []string{`3 replicas in datacenter "datacenter1", which has 1 nodes`}},
		{"{'class': 'NetworkTopologyStrategy', 'datacenter1': 3}", three, nil},
		{"{'class': 'NetworkTopologyStrategy', 'replication_factor': 2}", map[string]int{"a": 3, "b": 1}, []string{`2 replicas in datacenter "b"`}},
		{"{'class': 'NetworkTopologyStrategy', 'gone': 0, 'datacenter1': 1}", one, nil},
		{"{'class': 'EverywhereStrategy'}", one, nil},
	} {
		canon, err := normalizeReplication(tc.repl)
		require.NoError(t, err)
		err = fits(parseReplication(canon), tc.dcs)
		if tc.want == nil {
			assert.NoError(t, err, tc.repl)
			continue
		}
		require.ErrorIs(t, err, ErrReplicationDoesNotFit, tc.repl)
		for _, w := range tc.want {
			assert.Contains(t, err.Error(), w, tc.repl)
		}
	}
	stored := map[string]string{"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "datacenter1": "3"}
	require.ErrorIs(t, fits(stored, one), ErrReplicationDoesNotFit, "the class as system_schema stores it")
	assert.Equal(t, "{'class': 'org.apache.cassandra.locator.NetworkTopologyStrategy', 'datacenter1': 1}", mapLiteral(suggest(stored, one)))
	assert.Equal(t, "{'class': 'NetworkTopologyStrategy', 'datacenter1': 1}", mapLiteral(suggest(map[string]string{"class": "NetworkTopologyStrategy", "dc1": "3"}, one)))
	assert.Equal(t, "{'class': 'SimpleStrategy', 'replication_factor': 1}", mapLiteral(suggest(map[string]string{"class": "SimpleStrategy", "replication_factor": "3"}, one)))
}
