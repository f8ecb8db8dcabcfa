// Package voedger reads a PLog that Voedger (github.com/voedger/voedger)
// wrote, over the storage contract, so that cqlseq's sequencer can
// actualize from an existing Voedger partition.
//
// Key layout (big-endian), Voedger's SysView_PLog:
//
//	pKey  = u16 PLogView (20) ‖ u16 PartitionID ‖ u64 (offset >> 12)
//	cCols = u16 (offset & 0xFFF)
//
// Values are Voedger's byte codec, versions 1 and 2 (Decode). They are
// decoded as far as actualization needs, without the application's schema:
// the event's QName ID, partition, offset, WSID, WLog offset, times and
// sync fields, validity and error fields, the system fields (QName ID,
// ID, ParentID, container ID, IsActive) of every row of the argument, the
// unlogged argument and the CUDs, and the emptied-field indexes of codec 2
// CUDs. User fields (dynobuffers) are skipped by their length. Codec 0
// values are refused with ErrUnsupportedCodec.
//
// What an event contributes to the sequences (SeqValues) follows Voedger's
// own actualizer (VoedgerNumbers) with two corrections (Numbers): record
// IDs below FirstUserRecordID never count (a singleton created alone would
// otherwise pull the record-ID sequence into the singleton range), and a
// sys.Corrupted event contributes the record IDs of the event whose bytes
// it carries (Voedger reads nothing from it and issues those IDs again).
// Check verifies a PLog for record IDs created twice in a workspace and
// WLog offsets that repeat or go back.
package voedger
