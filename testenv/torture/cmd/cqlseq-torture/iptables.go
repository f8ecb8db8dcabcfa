package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// ruleTag is the comment of this cluster's iptables rules: the campaign's
// name and node 3's storage port, so that a cleanup removes these rules
// and never another cluster's.
func (t *tort) ruleTag() string {
	return fmt.Sprintf("cqlseq-torture:%d", storagePort(t.cluster.Nodes[2].Dir))
}

func storagePort(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "cassandra.yaml"))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "storage_port:"); ok {
			p, _ := strconv.Atoi(strings.TrimSpace(v))
			return p
		}
	}
	return 0
}

// partitionRules are the iptables rule specs (after -A/-D INPUT) that drop
// the storage-port traffic between 127.0.0.3 and 127.0.0.1 or 127.0.0.2,
// each carrying the comment tag (no spaces). Cassandra does not bind its
// outbound connections, so on loopback they leave from 127.0.0.1 whatever
// the node: what node 3 sends passes, what nodes 1 and 2 send to it is
// dropped. The cut is one-way (node 3 hears nothing), which is the fault
// that left node 3's failure detector holding nodes 1 and 2 down after the
// rules were gone.
func partitionRules(port int, tag string) [][]string {
	var rs [][]string
	for _, other := range []string{"127.0.0.1", "127.0.0.2"} {
		for _, dir := range [][2]string{{"127.0.0.3", other}, {other, "127.0.0.3"}} {
			rs = append(rs, []string{"-s", dir[0], "-d", dir[1], "-p", "tcp", "--dport", strconv.Itoa(port),
				"-m", "comment", "--comment", tag, "-j", "DROP"})
		}
	}
	return rs
}

func iptablesWorks() bool { return iptablesError() == nil }

// iptablesError says why iptables cannot be used here: not installed, or
// listing INPUT fails (not root, no netfilter); nil when it works.
func iptablesError() error {
	path, err := exec.LookPath("iptables")
	if err != nil {
		return fmt.Errorf("iptables is not installed (not on PATH: %v)", err)
	}
	out, err := exec.Command(path, "-w", "-L", "INPUT", "-n").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s -L INPUT failed (%v): %s", path, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// addRules appends each rule to INPUT and returns those it added.
func addRules(rules [][]string) ([][]string, error) {
	var added [][]string
	for _, r := range rules {
		out, err := exec.Command("iptables", append([]string{"-w", "-A", "INPUT"}, r...)...).CombinedOutput()
		if err != nil {
			return added, fmt.Errorf("iptables -A INPUT %s: %v: %s", strings.Join(r, " "), err, out)
		}
		added = append(added, r)
	}
	return added, nil
}

// deleteRules deletes exactly the given rules (one each), trying all.
func deleteRules(rules [][]string) error {
	var errs []error
	for _, r := range rules {
		out, err := exec.Command("iptables", append([]string{"-w", "-D", "INPUT"}, r...)...).CombinedOutput()
		if err != nil {
			errs = append(errs, fmt.Errorf("iptables -D INPUT %s: %v: %s", strings.Join(r, " "), err, out))
		}
	}
	return errors.Join(errs...)
}

// taggedRules returns the INPUT rules of `iptables -S INPUT` output that
// carry exactly the comment tag, as rule specs for -D.
func taggedRules(listing, tag string) [][]string {
	var rs [][]string
	for _, l := range strings.Split(listing, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != "-A" || f[1] != "INPUT" {
			continue
		}
		for i := 2; i+1 < len(f); i++ {
			if f[i] == "--comment" && strings.Trim(f[i+1], `"`) == tag {
				f[i+1] = tag // -D takes it unquoted
				rs = append(rs, f[2:])
				break
			}
		}
	}
	return rs
}

// removeTaggedRules deletes every INPUT rule carrying tag and returns how
// many it deleted. Without a working iptables there is nothing to remove.
func removeTaggedRules(tag string) (int, error) {
	if !iptablesWorks() {
		return 0, nil
	}
	out, err := exec.Command("iptables", "-w", "-S", "INPUT").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("iptables -S INPUT: %v: %s", err, out)
	}
	rs := taggedRules(string(out), tag)
	return len(rs), deleteRules(rs)
}
