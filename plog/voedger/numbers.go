package voedger

import "github.com/cqlseq/cqlseq/isequencer"

// Voedger's sequences (sys.WLogOffsetSequence, sys.RecordIDSequence) and
// their initial values, the first number each hands out in a workspace.
const (
	SeqIDWLogOffset isequencer.SeqID = 4
	SeqIDRecordID   isequencer.SeqID = 5

	FirstWLogOffset   isequencer.Number = 1
	FirstUserRecordID isequencer.Number = 200001

	// FirstSingletonID..MaxSingletonID are the fixed IDs of singleton
	// records; IDs up to MaxRawRecordID are raw IDs a command gives its
	// new records before Voedger replaces them.
	FirstSingletonID isequencer.Number = 65536
	MaxSingletonID   isequencer.Number = 66047
	MaxRawRecordID   isequencer.Number = 65535
)

// SeqTypes returns the sequences of a Voedger workspace kind with their
// initial values, for isequencer.Params.SeqTypes.
func SeqTypes() map[isequencer.SeqID]isequencer.Number {
	return map[isequencer.SeqID]isequencer.Number{SeqIDWLogOffset: FirstWLogOffset, SeqIDRecordID: FirstUserRecordID}
}

// MinAccepted is, per Voedger sequence, the smallest number that counts
// as issued by it: the initial values. Numbers below (singleton and raw
// record IDs) were never issued by the record-ID sequence and must not
// raise it.
func MinAccepted() map[isequencer.SeqID]isequencer.Number { return SeqTypes() }

// VoedgerNumbers appends to dst what Voedger's own actualizer
// (appparts/internal/seqstorage at c5ea53f) reads from e, in its order:
// for a valid event the IDs of the argument tree that carry IDs
// (pre-order), then the IDs of the CUD creates, all as record IDs; then
// the WLog offset. An invalid event (sys.Error, sys.Corrupted) gives its
// WLog offset only. Singleton IDs are included, as Voedger includes them.
// It is the reference Numbers is compared with; the sequencer uses Numbers.
func VoedgerNumbers(dst []isequencer.SeqValue, e *Event) []isequencer.SeqValue {
	if e.Valid {
		dst = appendRecordIDs(dst, e)
	}
	return appendWLog(dst, e)
}

// Numbers appends to dst what e contributes to the sequences of its
// workspace, correcting Voedger's actualizer (VoedgerNumbers) in two ways:
//   - record IDs below FirstUserRecordID (singletons, raw IDs) are left
//     out: they are fixed per type, never issued by the sequence;
//   - a sys.Corrupted event adds the record IDs of the original event it
//     carries (Event.Original, recursively), which exist in the Records
//     view and must not be issued again.
//
// The WLog offset (when not 0) is always included. Other invalid events
// (sys.Error) contribute their WLog offset only: their records were never
// applied.
func Numbers(dst []isequencer.SeqValue, e *Event) []isequencer.SeqValue {
	start := len(dst)
	for o := e; o != nil; o = o.Original {
		if o.Valid {
			dst = appendRecordIDs(dst, o)
		}
	}
	kept := dst[:start]
	for _, v := range dst[start:] {
		if v.Value >= FirstUserRecordID {
			kept = append(kept, v)
		}
	}
	return appendWLog(kept, e)
}

func appendRecordIDs(dst []isequencer.SeqValue, e *Event) []isequencer.SeqValue {
	key := isequencer.NumberKey{WSID: e.WSID, SeqID: SeqIDRecordID}
	dst = appendArgumentIDs(dst, key, &e.Argument)
	for _, c := range e.Creates {
		if c.ID != 0 {
			dst = append(dst, isequencer.SeqValue{Key: key, Value: isequencer.Number(c.ID)})
		}
	}
	return dst
}

// appendArgumentIDs appends the IDs of o's tree that Event.ArgumentIDs
// returns, in its order, without building that slice.
func appendArgumentIDs(dst []isequencer.SeqValue, key isequencer.NumberKey, o *Object) []isequencer.SeqValue {
	if o.Mask&MaskID != 0 && o.ID != 0 {
		dst = append(dst, isequencer.SeqValue{Key: key, Value: isequencer.Number(o.ID)})
	}
	for i := range o.Children {
		dst = appendArgumentIDs(dst, key, &o.Children[i])
	}
	return dst
}

func appendWLog(dst []isequencer.SeqValue, e *Event) []isequencer.SeqValue {
	if e.WLogOffset == 0 {
		return dst
	}
	return append(dst, isequencer.SeqValue{Key: isequencer.NumberKey{WSID: e.WSID, SeqID: SeqIDWLogOffset}, Value: isequencer.Number(e.WLogOffset)})
}
