// Package voedgertest holds the Voedger PLog golden data (rows written by
// Voedger's own code at commit c5ea53f, with what Voedger's decoder and
// actualizer read from each event; see /work/shared/voedger/README.md, as
// plog-golden.json here) and the suite that checks plog/voedger and the
// Voedger takeover (seqstorage.NewVoedger) against it on any
// storage.Storage. For tests only.
package voedgertest

import (
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

//go:embed plog-golden.json
var goldenJSON []byte

// Golden is plog-golden.json.
type Golden struct {
	ClusterAppID       uint32            `json:"cluster_app_id"`
	CodecVersion       int               `json:"codec_version"`
	QNameIDs           map[string]uint16 `json:"qname_ids"`
	ContainerIDs       map[string]uint16 `json:"container_ids"`
	SingletonIDs       map[string]uint64 `json:"singleton_ids"`
	SequenceQNameIDs   map[string]uint16 `json:"sequence_qname_ids"`
	RecordIDConstants  map[string]uint64 `json:"record_id_constants"`
	WorkspaceKindQName uint16            `json:"workspace_kind_qname_id"`
	Workspaces         []Workspace       `json:"workspaces"`
	Events             []Event           `json:"events"`
	Records            []Record          `json:"records"`
	SeqStorage         SeqStorage        `json:"seq_storage"`
}

// Workspace is one of the golden workspaces.
type Workspace struct {
	WSID           uint64 `json:"wsid"`
	Partition      uint16 `json:"partition"`
	NextWLogOffset uint64 `json:"next_wlog_offset"`
}

// Row is a stored row, hex-encoded.
type Row struct {
	PKey    string `json:"pkey_hex"`
	CCols   string `json:"ccols_hex"`
	Value   string `json:"value_hex"`
	Meaning string `json:"meaning,omitempty"`
}

// Bytes decodes the row.
func (r Row) Bytes() (pKey, cCols, value []byte) {
	return mustHex(r.PKey), mustHex(r.CCols), mustHex(r.Value)
}

// Event is one golden PLog row and what Voedger read from it.
type Event struct {
	Partition uint16 `json:"partition"`
	Offset    uint64 `json:"offset"`
	Note      string `json:"note"`
	Row
	WriteOps []string `json:"write_ops"`
	Expect   Expect   `json:"expect"`
}

// Expect is what Voedger's decoder and actualizer read from an event.
type Expect struct {
	QName             string     `json:"qname"`
	QNameID           uint16     `json:"qname_id"`
	OriginalQName     string     `json:"original_qname"`
	Valid             bool       `json:"valid"`
	Error             string     `json:"error"`
	OriginalBytes     string     `json:"original_event_bytes_hex"`
	Partition         uint16     `json:"partition"`
	PLogOffset        uint64     `json:"plog_offset"`
	WSID              uint64     `json:"wsid"`
	WLogOffset        uint64     `json:"wlog_offset"`
	RegisteredAt      int64      `json:"registered_at"`
	Synced            bool       `json:"synced"`
	DeviceID          uint16     `json:"device_id"`
	SyncedAt          int64      `json:"synced_at"`
	ArgumentQName     string     `json:"argument_qname"`
	ArgumentKind      string     `json:"argument_kind"`
	Argument          *Object    `json:"argument"`
	UnloggedArgQName  string     `json:"unlogged_argument_qname"`
	ArgumentIDs       []uint64   `json:"argument_ids"`
	CreatedIDs        []uint64   `json:"created_ids"`
	UpdatedIDs        []uint64   `json:"updated_ids"`
	SingletonIDs      []uint64   `json:"singleton_ids"`
	CUDs              []CUD      `json:"cuds"`
	ActualizerBatch   []SeqValue `json:"actualizer_batch"`
	MaxRecordIDInEvnt uint64     `json:"max_record_id_in_event"`
}

// Object is an argument object as Voedger decoded it.
type Object struct {
	QName     string   `json:"qname"`
	ID        uint64   `json:"id"`
	ParentID  uint64   `json:"parent_id"`
	Container string   `json:"container"`
	Children  []Object `json:"children"`
}

// CUD is a created or updated record as Voedger decoded it.
type CUD struct {
	QName     string `json:"qname"`
	ID        uint64 `json:"id"`
	ParentID  uint64 `json:"parent_id"`
	Container string `json:"container"`
	IsNew     bool   `json:"is_new"`
	IsActive  bool   `json:"is_active"`
}

// SeqValue is one number of Voedger's actualizer batch.
type SeqValue struct {
	WSID   uint64 `json:"wsid"`
	SeqID  uint16 `json:"seq_id"`
	Number uint64 `json:"number"`
}

// Record is a stored Records-view row with what Voedger read from it.
type Record struct {
	Row
	WSID     uint64 `json:"wsid"`
	ID       uint64 `json:"id"`
	QName    string `json:"qname"`
	IsActive bool   `json:"is_active"`
}

// SeqStorage is the sequence rows Voedger's isequencer wrote.
type SeqStorage struct {
	Snapshots    []Snapshot    `json:"snapshots"`
	Transactions []Transaction `json:"transactions"`
}

// Snapshot is the sequence rows at one point.
type Snapshot struct {
	Title string `json:"title"`
	Rows  []Row  `json:"rows"`
}

// Transaction is one Start/Next/Next/Flush of Voedger's sequencer after
// actualization.
type Transaction struct {
	Partition   uint16            `json:"partition"`
	WSID        uint64            `json:"wsid"`
	StartOffset uint64            `json:"start_returned_plog_offset"`
	Next        map[string]uint64 `json:"next_returned"`
}

// Load parses the embedded golden file.
func Load() (*Golden, error) {
	var g Golden
	if err := json.Unmarshal(goldenJSON, &g); err != nil {
		return nil, fmt.Errorf("voedgertest: plog-golden.json: %w", err)
	}
	return &g, nil
}

// QName returns the name of a QName ID ("." for 0).
func (g *Golden) QName(id uint16) string {
	if id == 0 {
		return "."
	}
	for n, v := range g.QNameIDs {
		if v == id {
			return n
		}
	}
	return fmt.Sprintf("?%d", id)
}

// Container returns the name of a container ID ("" for 0).
func (g *Golden) Container(id uint16) string {
	if id == 0 {
		return ""
	}
	for n, v := range g.ContainerIDs {
		if v == id {
			return n
		}
	}
	return fmt.Sprintf("?%d", id)
}

// Partitions returns the golden partitions in ascending order.
func (g *Golden) Partitions() []uint16 {
	var ps []uint16
	for _, e := range g.Events {
		if len(ps) == 0 || ps[len(ps)-1] != e.Partition {
			ps = append(ps, e.Partition)
		}
	}
	return ps
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(fmt.Sprintf("voedgertest: bad hex %q: %v", s, err))
	}
	return b
}
