package plog

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestGoldenKeys pins the persisted key layouts.
func TestGoldenKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"EventPKey", EventPKey(0x0102, 0x123456789), "0014" + "0102" + "0000000000123456"},
		{"EventCCols", EventCCols(0x123456789), "0789"},
		{"EventPKey first", EventPKey(7, 1), "0014" + "0007" + "0000000000000000"},
		{"EventCCols first", EventCCols(1), "0001"},
		{"EventPKey boundary", EventPKey(7, 4096), "0014" + "0007" + "0000000000000001"},
		{"EventCCols boundary", EventCCols(4096), "0000"},
		{"EventCCols last", EventCCols(4095), "0fff"},
		{"RecordPKey", RecordPKey(0x1122334455667788, 0x0A0B0C0D0E0F), "0013" + "1122334455667788" + "00000000a0b0c0d0"},
		{"RecordCCols", RecordCCols(0x0A0B0C0D0E0F), "0e0f"},
		{"RecordValue", RecordValue(0x0102030405060708), "0102030405060708"},
	} {
		assert.Equal(t, tc.want, hex.EncodeToString(tc.got), tc.name)
	}
}

func goldenEvent() *Event {
	return &Event{
		WSID:       0x1234,
		WSKind:     3,
		WLogOffset: 7,
		Numbers:    []SeqNumber{{SeqID: 1, Number: 322685000131072}, {SeqID: 2, Number: 5}},
		Records:    []RecordID{100, 101, 99},
		Payload:    []byte("hi"),
	}
}

// goldenHex is goldenEvent in FormatV1, field by field.
const goldenHex = "01" + // version
	"b424" + "03" + "07" + // WSID 0x1234, WSKind 3, WLogOffset 7
	"02" + "01" + "80c4baa6afaf49" + "02" + "05" + // 2 numbers: (1, 322685000131072), (2, 5)
	"03" + "64" + "02" + "03" + // 3 records: 100, +1, -2
	"02" + "6869" // payload "hi"

func TestGoldenEncoding(t *testing.T) {
	b, err := AppendEncoded(nil, goldenEvent())
	require.NoError(t, err)
	assert.Equal(t, goldenHex, hex.EncodeToString(b))

	raw, _ := hex.DecodeString(goldenHex)
	var e Event
	require.NoError(t, Decode(9, 4242, raw, &e))
	want := goldenEvent()
	want.Partition, want.Offset = 9, 4242
	assert.Equal(t, want, &e)
}

func TestEncodeEdgeValues(t *testing.T) {
	for name, ev := range map[string]*Event{
		"minimal":     {WSID: 1},
		"max":         {WSID: math.MaxUint64, WSKind: 0xFFFF, WLogOffset: math.MaxUint64, Numbers: []SeqNumber{{0xFFFF, math.MaxUint64}}, Records: []RecordID{math.MaxUint64, 1, math.MaxUint64}},
		"big payload": {WSID: 5, Payload: bytes.Repeat([]byte{0xAB}, 300)},
	} {
		b, err := AppendEncoded([]byte("prefix"), ev)
		require.NoError(t, err, name)
		require.Equal(t, "prefix", string(b[:6]), name)
		var got Event
		require.NoError(t, Decode(1, 1, b[6:], &got), name)
		ev.Partition, ev.Offset = 1, 1
		assertSameEvent(t, ev, &got, name)
	}
}

// assertSameEvent compares events treating nil and empty slices alike.
func assertSameEvent(t *testing.T, want, got *Event, msg string) {
	t.Helper()
	w, g := *want, *got
	w.Numbers, w.Records, w.Payload = nil, nil, nil
	g.Numbers, g.Records, g.Payload = nil, nil, nil
	assert.Equal(t, w, g, msg)
	assert.True(t, slices.Equal(want.Numbers, got.Numbers), "%s: Numbers %v, want %v", msg, got.Numbers, want.Numbers)
	assert.True(t, slices.Equal(want.Records, got.Records), "%s: Records %v, want %v", msg, got.Records, want.Records)
	assert.True(t, bytes.Equal(want.Payload, got.Payload), "%s: Payload %x, want %x", msg, got.Payload, want.Payload)
}

func TestEncodeRejectsInvalidEvents(t *testing.T) {
	for name, ev := range map[string]*Event{
		"WSID 0":      {},
		"number 0":    {WSID: 1, Numbers: []SeqNumber{{1, 0}}},
		"record ID 0": {WSID: 1, Records: []RecordID{5, 0}},
	} {
		_, err := AppendEncoded(nil, ev)
		assert.Error(t, err, name)
	}
}

func TestDecodeCorrupt(t *testing.T) {
	golden, _ := hex.DecodeString(goldenHex)
	cat := func(parts ...string) []byte { b, _ := hex.DecodeString(strings.Join(parts, "")); return b }
	for _, tc := range []struct {
		name string
		b    []byte
		werr string
	}{
		{"empty", nil, "empty body"},
		{"bad version", cat("04", goldenHex[2:]), "unknown format version 4"},
		{"gap marker with an event's body", cat("02", goldenHex[2:]), "trailing bytes"},
		{"version 0", cat("00"), "unknown format version 0"},
		{"truncated header", cat("01b4"), "truncated at byte 1 reading WSID"},
		{"truncated in numbers", golden[:10], "truncated"},
		{"truncated payload", golden[:len(golden)-1], "payload length 2 exceeds the 1 bytes left"},
		{"trailing garbage", append(append([]byte{}, golden...), 0), "1 trailing bytes"},
		{"WSID 0", cat("01", "00", "00", "00", "00", "00", "00"), "WSID 0"},
		{"WSKind out of range", cat("01", "01", "808004", "00", "00", "00", "00"), "WSKind 65536 out of range"},
		{"number count exceeds buffer", cat("01", "01", "00", "00", "ffffffff0f", "0101"), "number count 4294967295 exceeds"},
		{"truncated number", cat("01", "01", "00", "00", "02", "01", "818080"), "truncated at byte 6 reading number"},
		{"SeqID out of range", cat("01", "01", "00", "00", "01", "808004", "01", "00", "00"), "SeqID 65536 out of range"},
		{"number 0", cat("01", "01", "00", "00", "01", "01", "00", "00", "00"), "SeqID 1 with number 0"},
		{"record count exceeds buffer", cat("01", "01", "00", "00", "00", "05", "01", "00"), "record count 5 exceeds"},
		{"record ID 0", cat("01", "01", "00", "00", "00", "02", "01", "01", "00"), "record ID 0 at index 1"},
		{"payload length exceeds buffer", cat("01", "01", "00", "00", "00", "00", "ffffffffffffffffff01"), "payload length 18446744073709551615 exceeds"},
		{"varint overflow", cat("01", "ffffffffffffffffff7f"), "varint overflow at byte 1 reading WSID"},
	} {
		var e Event
		err := Decode(3, 77, tc.b, &e)
		if !assert.ErrorIs(t, err, ErrCorrupt, tc.name) {
			continue
		}
		assert.Contains(t, err.Error(), "partition 3 offset 77", tc.name)
		assert.Contains(t, err.Error(), tc.werr, tc.name)
	}
}

// TestDecodeReusesSlices: decoding into a used Event does not allocate new
// Numbers/Records when they fit.
func TestDecodeReusesSlices(t *testing.T) {
	raw, _ := hex.DecodeString(goldenHex)
	e := Event{Numbers: make([]SeqNumber, 0, 8), Records: make([]RecordID, 0, 8)}
	nums, recs := &e.Numbers[:1][0], &e.Records[:1][0]
	require.NoError(t, Decode(1, 1, raw, &e))
	assert.Same(t, nums, &e.Numbers[0])
	assert.Same(t, recs, &e.Records[0])
	allocs := testing.AllocsPerRun(100, func() {
		if err := Decode(1, 1, raw, &e); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

func TestModeStringParse(t *testing.T) {
	for _, m := range []Mode{ModeTrust0, ModeTrust1, ModeTrust2, ModeFenced} {
		got, err := ParseMode(m.String())
		require.NoError(t, err)
		assert.Equal(t, m, got)
		txt, err := m.MarshalText()
		require.NoError(t, err)
		var back Mode
		require.NoError(t, back.UnmarshalText(txt))
		assert.Equal(t, m, back)
	}
	assert.Equal(t, "trust0", Mode(0).String(), "the zero Mode is trust0")
	assert.Equal(t, "fenced", Mode(3).String(), "fenced is persisted as 3")
	require.NoError(t, ModeFenced.Validate())
	assert.Equal(t, "Mode(4)", Mode(4).String())
	require.ErrorIs(t, Mode(4).Validate(), ErrInvalidOptions)
	_, err := Mode(9).MarshalText()
	require.Error(t, err)
	_, err = ParseMode("TRUST0")
	require.ErrorContains(t, err, "unknown mode")
	var m Mode = ModeTrust2
	require.Error(t, m.UnmarshalText([]byte("x")))
	assert.Equal(t, ModeTrust2, m, "a failed UnmarshalText leaves the mode")
}

func FuzzDecode(f *testing.F) {
	golden, _ := hex.DecodeString(goldenHex)
	f.Add(golden)
	f.Add([]byte{})
	f.Add([]byte{1, 1, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{FormatSkip, 0xac, 0x02})
	f.Add([]byte{FormatVoid, 0xac, 0x02})
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Event
		err := Decode(1, 2, b, &e)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		// What decodes re-encodes to something that decodes to the same.
		re, err := AppendEncoded(nil, &e)
		if err != nil {
			t.Fatalf("decoded event does not encode: %v", err)
		}
		var e2 Event
		if err := Decode(1, 2, re, &e2); err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		if len(re) > len(b) {
			t.Fatalf("canonical encoding %d bytes longer than input %d", len(re), len(b))
		}
		assert.Equal(t, e.WSID, e2.WSID)
		assert.Equal(t, e.Numbers, e2.Numbers)
		assert.Equal(t, e.Records, e2.Records)
		assert.Equal(t, e.Payload, e2.Payload)
		assert.Equal(t, e.Skip, e2.Skip)
		assert.Equal(t, e.Void, e2.Void)
	})
}
