// Command cqlseq-netdelay delays every packet its network namespace sends
// on one interface by a fixed time: a one-way link delay for a container
// on a kernel without the netem qdisc (tc qdisc ... netem needs
// CONFIG_NET_SCH_NETEM, which the project's machines lack). It runs inside
// the container (CAP_NET_ADMIN), where the netcluster harness copies it.
//
//	cqlseq-netdelay -delay 5ms [-iface eth0] [-queue 0]
//	cqlseq-netdelay -probe HOST:PORT [-n 20]   # prints the median TCP connect time in ms
//
// It makes sure the rule `iptables -A OUTPUT -o IFACE -j NFQUEUE
// --queue-num Q --queue-bypass` exists, binds netfilter queue Q over
// netlink and accepts each packet once it has waited the delay. The rule
// stays when the command ends: with --queue-bypass, packets pass unqueued
// while nothing is bound, so stopping the command (SIGTERM) removes the
// delay and starting it again with another delay changes it. Packets leave
// in the order they came (one fixed delay), so one batch verdict accepts
// every packet whose time has come. If the command cannot keep up (its
// socket buffer or the queue is full) packets pass undelayed (fail-open),
// never dropped.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// nfnetlink_queue constants (linux/netfilter/nfnetlink_queue.h).
const (
	nfnlSubsysQueue = 3

	nfqnlMsgPacket       = 0
	nfqnlMsgConfig       = 2
	nfqnlMsgVerdictBatch = 3

	nfqaPacketHdr  = 1
	nfqaVerdictHdr = 2

	nfqaCfgCmd     = 1
	nfqaCfgParams  = 2
	nfqaCfgMaxLen  = 3
	nfqaCfgMask    = 4
	nfqaCfgFlags   = 5
	nfqnlCfgBind   = 1
	nfqnlCopyMeta  = 1
	nfqaCfgFFailOp = 1

	nfAccept = 1
)

func main() {
	delay := flag.Duration("delay", 0, "one-way delay of every packet sent on -iface")
	iface := flag.String("iface", "eth0", "interface whose outgoing packets are delayed")
	queue := flag.Uint("queue", 0, "netfilter queue number")
	pidFile := flag.String("pidfile", "/run/cqlseq-netdelay.pid", "file the command's pid is written to")
	probeAddr := flag.String("probe", "", "measure the TCP connect time (one round trip) to HOST:PORT instead")
	probeN := flag.Int("n", 20, "-probe: connections")
	flag.Parse()
	if *probeAddr != "" {
		ms, err := probe(*probeAddr, *probeN)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cqlseq-netdelay:", err)
			os.Exit(1)
		}
		fmt.Printf("%.3f\n", ms)
		return
	}
	if err := run(*delay, *iface, uint16(*queue), *pidFile); err != nil {
		fmt.Fprintln(os.Stderr, "cqlseq-netdelay:", err)
		os.Exit(1)
	}
}

func run(delay time.Duration, iface string, queue uint16, pidFile string) error {
	if delay <= 0 || delay > 10*time.Second {
		return fmt.Errorf("-delay %v: want 0 < delay <= 10s (no delay: do not run the command)", delay)
	}
	if err := ensureRule(iface, queue); err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink bind: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_NO_ENOBUFS, 1)
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 16<<20)
	}
	q := &nfq{fd: fd, queue: queue}
	if err := q.configure(); err != nil {
		return err
	}
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	defer os.Remove(pidFile)

	// The reader stamps each packet; the sender accepts them in order.
	type pkt struct {
		id  uint32
		due time.Time
	}
	pkts := make(chan pkt, 1<<16)
	readErr := make(chan error, 1)
	go func() {
		buf := make([]byte, 1<<16)
		for {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOBUFS) {
					continue
				}
				readErr <- fmt.Errorf("netlink receive: %w", err)
				return
			}
			now := time.Now()
			for _, id := range packetIDs(buf[:n]) {
				pkts <- pkt{id: id, due: now.Add(delay)}
			}
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	fmt.Fprintf(os.Stderr, "cqlseq-netdelay: delaying packets out of %s by %v (queue %d)\n", iface, delay, queue)
	// wait sleeps until due in the kernel (clock_nanosleep: tens of
	// microseconds late at most; Go's timers round a sub-millisecond wait
	// up to a millisecond); false: the command is to stop.
	wait := func(due time.Time) (bool, error) {
		if d := time.Until(due); d > 0 {
			ts := unix.NsecToTimespec(d.Nanoseconds())
			for unix.Nanosleep(&ts, &ts) == unix.EINTR {
			}
		}
		select {
		case err := <-readErr:
			return false, err
		case <-sig:
			return false, nil
		default:
			return true, nil
		}
	}
	for {
		var p pkt
		select {
		case p = <-pkts:
		case err := <-readErr:
			return err
		case <-sig:
			return nil
		}
		if ok, err := wait(p.due); !ok {
			return err
		}
		// Accept, with one verdict, every packet that is due by now.
		last := p.id
	drain:
		for {
			select {
			case n := <-pkts:
				if time.Until(n.due) > 0 {
					if err := q.accept(last); err != nil {
						return err
					}
					if ok, err := wait(n.due); !ok {
						return err
					}
				}
				last = n.id
			default:
				break drain
			}
		}
		if err := q.accept(last); err != nil {
			return err
		}
	}
}

// probe returns the median time of n TCP connects to addr, in ms.
func probe(addr string, n int) (float64, error) {
	if n < 1 {
		n = 1
	}
	ts := make([]float64, 0, n)
	for range n {
		began := time.Now()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return 0, err
		}
		ts = append(ts, float64(time.Since(began))/float64(time.Millisecond))
		_ = c.Close()
		time.Sleep(10 * time.Millisecond)
	}
	slices.Sort(ts)
	return ts[len(ts)/2], nil
}

// ensureRule adds the NFQUEUE rule unless it is there.
func ensureRule(iface string, queue uint16) error {
	rule := []string{"OUTPUT", "-o", iface, "-j", "NFQUEUE", "--queue-num", strconv.Itoa(int(queue)), "--queue-bypass"}
	if exec.Command("iptables", append([]string{"-C"}, rule...)...).Run() == nil {
		return nil
	}
	if out, err := exec.Command("iptables", append([]string{"-A"}, rule...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables -A %v: %v: %s", rule, err, out)
	}
	return nil
}

type nfq struct {
	fd    int
	queue uint16
	seq   uint32
}

// configure binds the queue, asks for packet metadata only, and makes the
// queue fail open.
func (q *nfq) configure() error {
	cmd := []byte{nfqnlCfgBind, 0, 0, 0} // command, pad, pf (be16, unused since Linux 3.8)
	params := make([]byte, 5)            // copy_range be32, copy_mode u8
	params[4] = nfqnlCopyMeta
	maxLen := binary.BigEndian.AppendUint32(nil, 1<<16)
	flags := binary.BigEndian.AppendUint32(nil, nfqaCfgFFailOp)
	for _, attrs := range [][]attr{
		{{nfqaCfgCmd, cmd}},
		{{nfqaCfgParams, params}},
		{{nfqaCfgMaxLen, maxLen}},
		{{nfqaCfgMask, flags}, {nfqaCfgFlags, flags}},
	} {
		if err := q.request(nfqnlMsgConfig, unix.NLM_F_ACK, attrs); err != nil {
			return err
		}
		if err := q.readAck(); err != nil {
			return fmt.Errorf("configuring queue %d: %w", q.queue, err)
		}
	}
	return nil
}

// accept accepts every queued packet with an id up to id.
func (q *nfq) accept(id uint32) error {
	if id == 0 {
		return nil
	}
	v := binary.BigEndian.AppendUint32(nil, nfAccept)
	v = binary.BigEndian.AppendUint32(v, id)
	return q.request(nfqnlMsgVerdictBatch, 0, []attr{{nfqaVerdictHdr, v}})
}

type attr struct {
	typ  uint16
	data []byte
}

func (q *nfq) request(msg uint16, flags uint16, attrs []attr) error {
	q.seq++
	b := make([]byte, unix.NLMSG_HDRLEN, 64)
	b = append(b, unix.AF_UNSPEC, 0, 0, 0) // nfgenmsg: family, version, res_id (be16)
	binary.BigEndian.PutUint16(b[unix.NLMSG_HDRLEN+2:], q.queue)
	for _, a := range attrs {
		l := 4 + len(a.data)
		b = binary.NativeEndian.AppendUint16(b, uint16(l))
		b = binary.NativeEndian.AppendUint16(b, a.typ)
		b = append(b, a.data...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], nfnlSubsysQueue<<8|msg)
	binary.NativeEndian.PutUint16(b[6:], unix.NLM_F_REQUEST|flags)
	binary.NativeEndian.PutUint32(b[8:], q.seq)
	if err := unix.Sendto(q.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	return nil
}

// readAck reads until the answer to the last request: an NLMSG_ERROR
// carrying 0 (an ack) or an errno.
func (q *nfq) readAck() error {
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(q.fd, buf, 0)
		if err != nil {
			return err
		}
		for b := buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			l := int(binary.NativeEndian.Uint32(b))
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				break
			}
			typ := binary.NativeEndian.Uint16(b[4:])
			seq := binary.NativeEndian.Uint32(b[8:])
			if typ == unix.NLMSG_ERROR && seq == q.seq && l >= unix.NLMSG_HDRLEN+4 {
				if e := int32(binary.NativeEndian.Uint32(b[unix.NLMSG_HDRLEN:])); e != 0 {
					return syscall.Errno(-e)
				}
				return nil
			}
			b = next(b, l)
		}
	}
}

// packetIDs returns the packet ids of the queue's packet messages in b.
func packetIDs(b []byte) []uint32 {
	var ids []uint32
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(b))
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			break
		}
		typ := binary.NativeEndian.Uint16(b[4:])
		if typ == nfnlSubsysQueue<<8|nfqnlMsgPacket && l >= unix.NLMSG_HDRLEN+4 {
			for a := b[unix.NLMSG_HDRLEN+4 : l]; len(a) >= 4; {
				al := int(binary.NativeEndian.Uint16(a))
				at := binary.NativeEndian.Uint16(a[2:]) & 0x3fff
				if al < 4 || al > len(a) {
					break
				}
				if at == nfqaPacketHdr && al >= 8 {
					ids = append(ids, binary.BigEndian.Uint32(a[4:]))
					break
				}
				a = next(a, al)
			}
		}
		b = next(b, l)
	}
	return ids
}

// next returns b after its first n bytes, padded to 4.
func next(b []byte, n int) []byte {
	return b[min((n+3)&^3, len(b)):]
}
