package main

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// packetMsg is a queue packet message as the kernel sends it: the packet
// header attribute after another attribute.
func packetMsg(id uint32) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN)
	b = append(b, unix.AF_INET, 0, 0, 0)
	// NFQA_MARK (3), 4 bytes
	b = binary.NativeEndian.AppendUint16(b, 8)
	b = binary.NativeEndian.AppendUint16(b, 3)
	b = append(b, 0, 0, 0, 1)
	// NFQA_PACKET_HDR: id (be32), hw_protocol (be16), hook (u8), padded
	b = binary.NativeEndian.AppendUint16(b, 4+7)
	b = binary.NativeEndian.AppendUint16(b, nfqaPacketHdr)
	b = binary.BigEndian.AppendUint32(b, id)
	b = append(b, 0x08, 0x00, 3, 0)
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], nfnlSubsysQueue<<8|nfqnlMsgPacket)
	return b
}

func TestPacketIDsReadsEveryMessage(t *testing.T) {
	var buf []byte
	for _, id := range []uint32{7, 8, 300} {
		buf = append(buf, packetMsg(id)...)
	}
	got := packetIDs(buf)
	want := []uint32{7, 8, 300}
	if len(got) != len(want) {
		t.Fatalf("packetIDs = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("packetIDs = %v, want %v", got, want)
		}
	}
	if ids := packetIDs(buf[:len(buf)-3]); len(ids) != 2 {
		t.Fatalf("a truncated last message: ids %v, want the first two", ids)
	}
}
