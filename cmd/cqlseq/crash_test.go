package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// crashKillsEnv sets TestCrashBBolt's number of kills (default 8; make
// crash-bbolt runs 100).
const crashKillsEnv = "CQLSEQ_CRASH_KILLS"

// child returns a command running cqlseq with args in a child process
// (this test binary, see TestMain).
func child(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+strings.Join(args, " "))
	return cmd
}

// TestCrashBBolt SIGKILLs `cqlseq bench` on a bbolt file (fsync on, 4
// partitions x 16 clients) at random instants, restarting it on the same
// file each time, one file and one ack log (bench --ack-log) per mode, and
// runs `cqlseq verify --acks` after every kill: it must find nothing (no
// number twice, no stored number below an event's, no stored offset past
// the log, and every acknowledged command's event in the log with exactly
// its numbers: none lost).
func TestCrashBBolt(t *testing.T) {
	kills := 8
	if s := os.Getenv(crashKillsEnv); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, crashKillsEnv)
		kills = n
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	dir := t.TempDir()
	modes := []string{"trust0", "trust1", "trust2", "fenced"}
	acked := map[string]int{} // by mode: the commands in its ack log
	for k := range kills {
		mode := modes[k%len(modes)]
		file := filepath.Join(dir, mode+".db")
		bench := child("bench", "--store", "bbolt", "--file", file, "--mode", mode, "--partitions", "4",
			"--concurrency", "16", "--duration", "1m", "--no-progress", "--log-level", "error", "--ack-log", file+".acks")
		var out bytes.Buffer
		bench.Stdout, bench.Stderr = &out, &out
		require.NoError(t, bench.Start())
		// Once the store is open and the ack log exists (bench creates it
		// before it opens the partitions): past their opening
		// (takeover, actualization) most of the time, but sometimes during
		// it. A kill before the store file exists would leave nothing to
		// verify.
		require.Eventually(t, func() bool { _, err := os.Stat(file + ".acks"); return err == nil }, time.Minute, time.Millisecond,
			"bench created no ack log: %s", &out)
		time.Sleep(time.Duration(rng.IntN(1200)) * time.Millisecond)
		require.NoError(t, bench.Process.Kill())
		err := bench.Wait()
		require.Error(t, err, "bench ended before the kill: %s", out.String())

		report := filepath.Join(dir, "verify.json")
		verify := child("verify", "--file", file, "--partition", "0,1,2,3", "--acks", file+".acks", "--json", report)
		got, err := verify.CombinedOutput()
		require.NoError(t, err, "kill %d (%s): verify found a problem:\n%s", k+1, mode, got)
		var r struct {
			Acks struct {
				Acks     int    `json:"acks"`
				Problems uint64 `json:"problems"`
			} `json:"acks"`
		}
		b, err := os.ReadFile(report)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &r))
		require.Zero(t, r.Acks.Problems, "kill %d (%s): %s", k+1, mode, got)
		acked[mode] = r.Acks.Acks
		if k < len(modes) {
			t.Logf("kill %d (%s): %s", k+1, mode, firstLine(got))
		}
	}
	t.Logf("%d kills, verify found nothing after any of them; acknowledged commands checked, none lost: %v", kills, acked)
}

func firstLine(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}
