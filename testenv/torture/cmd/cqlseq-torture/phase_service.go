package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// servicePhase is issue 37's campaign of the ID service under a client
// nobody here wrote: 3 cqlseq serve instances on one keyspace (the
// cluster's replication factor), all of one ID space (the default --name:
// their node leases compete), loaded by one vegeta attack each (-vegeta)
// on the galloc, timeshard and Leaf paths, every response saved. During
// the load: one instance SIGTERMed (it must exit 0 within its
// --shutdown-timeout, and its restart take the node IDs it released) and
// restarted, instances SIGKILLed and restarted; in the full campaign
// (not -short, -node-faults > 0, -state) also a node SIGKILLed and
// restarted and one SIGSTOPped. Meanwhile the admin load
// (phase_service_admin.go) alters sequences and retires one. Then
// checkService reads every body: no ID
// twice (per galloc sequence, per timeshard layout, Leaf's paths in the
// same sets), every non-2xx answer or transport error inside a fault
// window that explains it, galloc's waste within 2 chunks per instance
// start.
type servicePhase struct{}

func (servicePhase) name() string { return "service" }

func (servicePhase) run(ctx context.Context, t *tort) error {
	s := &svcCampaign{t: t}
	defer s.stopAll()
	return s.run(ctx)
}

// The service phase's shape.
const (
	svcInstances       = 3
	svcRate            = 150 // requests per second of each instance's attack
	svcChunk           = 100 // the sequences' chunk size: chunks roll every second or so
	svcLease           = 5 * time.Second
	svcShutdownTimeout = 5 * time.Second
	svcRequestTimeout  = 1500 * time.Millisecond // below vegeta's -timeout: the service answers first
	svcClientTimeout   = 2 * time.Second
	svcInstanceGrace   = 3 * time.Second
	svcNodeGrace       = 15 * time.Second
	svcReadyTimeout    = 90 * time.Second
)

var svcSequences = []string{"svc_a", "svc_b", svcAdaptiveSeq, svcRetiredSeq}

// svcTargets are each attack's targets, taken in turn: galloc next
// (single and small batches), timeshard next of both layouts (a batch of
// 300 of the 53-bit layout spans at least three milliseconds of its 128
// IDs each), Leaf's segment and snowflake paths.
var svcTargets = []string{
	"POST /v1/sequences/svc_a/next",
	"POST /v1/sequences/svc_a/next?count=5",
	"GET /api/segment/get/svc_a",
	"POST /v1/timeshard/63/next",
	"POST /v1/sequences/svc_b/next?count=3",
	"POST /v1/timeshard/53/next?count=2",
	"GET /api/snowflake/get/svc_b",
	"GET /api/segment/get/svc_b",
	"POST /v1/timeshard/63/next?count=4",
	"POST /v1/timeshard/53/next",
	"POST /v1/timeshard/53/next?count=300",
	"POST /v1/sequences/svc_c/next?count=2",
	"GET /api/segment/get/svc_r",
	"POST /v1/sequences/svc_r/next?count=2",
}

// svcInstance is one serve instance: its port stays across restarts (so
// its attack carries on), proc is the running process.
type svcInstance struct {
	idx     int // 1-based
	port    int
	proc    *child
	starts  int
	attack  *child
	results string
	nodes   map[string]int // node ID per layout of the running process
}

func (in *svcInstance) base() string { return "http://127.0.0.1:" + strconv.Itoa(in.port) }

type svcCampaign struct {
	t        *tort
	ks       string
	tokens   string // the token file
	issue    string
	admin    string
	inst     []*svcInstance
	faults   []svcFault
	starts   int
	problems []string // the phase's own checks (SIGTERM, node IDs)
	notes    []string
}

// serviceStats are the service row's details (its own table).
type serviceStats struct {
	rep      *svcReport
	faults   []svcFault
	problems []string
	notes    []string
	load     time.Duration
}

func (s *svcCampaign) fail(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	s.problems = append(s.problems, msg)
	s.t.logf("service: FAILED: %s", msg)
}

func (s *svcCampaign) run(ctx context.Context) error {
	t := s.t
	full := !t.c.short && t.c.nodeFaults > 0 && t.cluster != nil
	if full {
		if _, err := t.needsNodes("service"); err != nil {
			return err
		}
	}
	began := time.Now()
	ks, err := t.keyspace(ctx, "service")
	if err != nil {
		return err
	}
	s.ks = ks
	if err := s.writeTokens(); err != nil {
		return err
	}
	for i := range svcInstances {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.inst = append(s.inst, &svcInstance{idx: i + 1, port: port, results: filepath.Join(t.c.dir, fmt.Sprintf("service-i%d.vegeta.bin", i+1))})
	}
	// One after another, each ready before the next: on a fresh keyspace
	// they hold nodes 0, 1 and 2 of each layout.
	for _, in := range s.inst {
		if err := s.start(ctx, in); err != nil {
			return err
		}
	}
	s.checkNodes("at start")
	for _, seq := range svcSequences {
		if err := s.createSequence(ctx, seq); err != nil {
			return err
		}
	}
	for _, in := range s.inst {
		if err := s.startAttack(in); err != nil {
			return err
		}
	}
	loadBegan := time.Now()
	t.logf("service: keyspace %s, instances on ports %s, vegeta at %d req/s each; faults and alters follow", ks, s.ports(), svcRate)
	admin := s.startAdmin(ctx)
	adminStopped := false
	stopAdmin := func() {
		if adminStopped {
			return
		}
		adminStopped = true
		note, problem := admin.stop()
		s.notes = append(s.notes, note)
		if problem != "" {
			s.fail("%s", problem)
		}
	}
	defer stopAdmin()

	settle := 6 * time.Second
	kills := 2
	if !t.c.short {
		settle, kills = 10*time.Second, 5
	}
	if err := sleep(ctx, settle); err != nil {
		return err
	}
	victim := 1 + t.rng.IntN(svcInstances)
	if err := s.terminate(ctx, s.inst[victim-1]); err != nil {
		return err
	}
	retired, err := s.retire(ctx)
	if err != nil {
		return err
	}
	for k := range kills {
		if err := sleep(ctx, settle); err != nil {
			return err
		}
		in := s.inst[(victim+k)%svcInstances]
		if err := s.kill(ctx, in, time.Duration(500+t.rng.IntN(1500))*time.Millisecond); err != nil {
			return err
		}
	}
	if full {
		if err := sleep(ctx, settle); err != nil {
			return err
		}
		node := 1 + t.rng.IntN(3)
		t.logf("service: SIGKILL node %d, down 5 s, restart", node)
		f := svcFault{Kind: faultNodeKill, Node: node, Began: time.Now()}
		err := t.restartNode(ctx, node, 5*time.Second)
		f.Ended = time.Now()
		s.faults = append(s.faults, f)
		if err != nil {
			return err
		}
		if err := sleep(ctx, settle); err != nil {
			return err
		}
		node = 1 + t.rng.IntN(3)
		t.logf("service: SIGSTOP node %d for %v", node, t.c.pause)
		pf, err := t.pauseNode(ctx, node, t.c.pause)
		s.faults = append(s.faults, svcFault{Kind: faultNodePause, Node: node, Began: pf.Began, Ended: pf.Ended})
		if err != nil {
			return err
		}
	}
	if err := sleep(ctx, settle); err != nil {
		return err
	}
	s.checkNodes("at the end")
	stopAdmin()
	load := time.Since(loadBegan)
	// The attacks first (vegeta writes its last results on SIGINT), then
	// the instances.
	for _, in := range s.inst {
		if err := stopAttack(in.attack); err != nil {
			s.fail("instance %d's vegeta: %v", in.idx, err)
		}
	}
	for _, in := range s.inst {
		in.proc.stop()
	}

	var results []svcResult
	for _, in := range s.inst {
		rs, err := s.decode(ctx, in)
		if err != nil {
			return err
		}
		results = append(results, rs...)
	}
	slices.SortStableFunc(results, func(a, b svcResult) int { return a.Timestamp.Compare(b.Timestamp) })
	cfg := svcCheckConfig{Sequences: svcSequences, ChunkSize: svcChunk, Starts: s.starts, InstanceGrace: svcInstanceGrace, NodeGrace: svcNodeGrace,
		MaxChunk: svcMaxChunk, Retired: map[string]svcRetire{svcRetiredSeq: retired}, RetireGrace: svcRetireGrace}
	rep := checkService(results, s.faults, cfg)
	problems := append(rep.Problems(), s.problems...)
	for _, e := range rep.Examples {
		t.logf("service: %s", e)
	}
	r := row{phase: "service", faults: len(s.faults), acked: rep.OK, failed: fmt.Sprintf("%d non-2xx", rep.Requests-rep.OK),
		dups: uint64(rep.Duplicates), note: fmt.Sprintf("%d requests, %d IDs checked; %d instance starts; %.0f s of load, %.0f s in all",
			rep.Requests, rep.IDs, s.starts, load.Seconds(), time.Since(began).Seconds())}
	r.service = &serviceStats{rep: rep, faults: s.faults, problems: problems, notes: s.notes, load: load}
	if len(problems) > 0 {
		t.failed = true
		r.verifyFail = true
		r.note += "; FAILED: " + strings.Join(problems, "; ")
		t.logf("service: FAILED: %s", strings.Join(problems, "; "))
	}
	t.rows = append(t.rows, r)
	t.logf("service: %d requests, %d 2xx, %d IDs (%s), %d duplicates, non-2xx explained: %s; unexplained: %s; waste: %s",
		rep.Requests, rep.OK, rep.IDs, fmtCounts(rep.PerSet), rep.Duplicates, fmtCounts(rep.Explained), fmtCounts(rep.Unexplained), fmtWaste(rep))
	return nil
}

// stopAll stops every attack and instance still running (an error or an
// interruption ended the phase early).
func (s *svcCampaign) stopAll() {
	for _, in := range s.inst {
		if in.attack != nil {
			_ = stopAttack(in.attack)
		}
	}
	for _, in := range s.inst {
		if in.proc != nil {
			in.proc.stop()
		}
	}
}

func (s *svcCampaign) ports() string {
	var ps []string
	for _, in := range s.inst {
		ps = append(ps, strconv.Itoa(in.port))
	}
	return strings.Join(ps, ",")
}

func (s *svcCampaign) writeTokens() error {
	tok := func() string {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}
	s.issue, s.admin = tok(), tok()
	s.tokens = filepath.Join(s.t.c.dir, "service.tokens")
	return os.WriteFile(s.tokens, []byte("issue "+s.issue+"\nadmin "+s.admin+"\n"), 0o600)
}

// freePort is a loopback port free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start starts instance in's process and waits until it is ready.
func (s *svcCampaign) start(ctx context.Context, in *svcInstance) error {
	in.starts++
	s.starts++
	tag := fmt.Sprintf("service-i%d-s%d", in.idx, in.starts)
	c, err := startChild(s.t.c.dir, tag, s.t.c.cqlseq, "serve", "--hosts", s.t.c.hosts, "--keyspace", s.ks,
		"--listen", "127.0.0.1:"+strconv.Itoa(in.port), "--token-file", s.tokens, "--lease", svcLease.String(),
		"--shutdown-timeout", svcShutdownTimeout.String(), "--request-timeout", svcRequestTimeout.String(), "--timeout", "2s")
	if err != nil {
		return err
	}
	in.proc = c
	if err := s.waitReady(ctx, in); err != nil {
		return err
	}
	nodes, err := s.nodesOf(ctx, in)
	if err != nil {
		return err
	}
	in.nodes = nodes
	s.t.logf("service: instance %d (%s) ready in %.1f s on port %d, nodes %v", in.idx, tag, time.Since(c.started).Seconds(), in.port, nodes)
	return nil
}

func (s *svcCampaign) waitReady(ctx context.Context, in *svcInstance) error {
	deadline := time.Now().Add(svcReadyTimeout)
	cl := &http.Client{Timeout: time.Second}
	for {
		if err := in.proc.exited(); err != nil {
			return err
		}
		resp, err := cl.Get(in.base() + "/readyz")
		if err == nil {
			// "ready", not "degraded" (200 too, while a layout waits for
			// a node ID): the campaign wants every layout's node.
			var b struct {
				Status string `json:"status"`
			}
			derr := json.NewDecoder(resp.Body).Decode(&b)
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && derr == nil && b.Status == "ready" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("service: instance %d not ready after %v (output in %s)", in.idx, svcReadyTimeout, in.proc.errOut)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// call makes one request of the API with token and decodes a 2xx JSON
// answer into out.
func (s *svcCampaign) call(ctx context.Context, method, url, token, body string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w", method, url, err)
		}
	}
	return resp.StatusCode, nil
}

// nodesOf is the node ID in holds of each layout (GET /v1/timeshard).
func (s *svcCampaign) nodesOf(ctx context.Context, in *svcInstance) (map[string]int, error) {
	var b struct {
		Layouts []struct {
			Name string `json:"name"`
			Node int    `json:"node"`
		} `json:"layouts"`
	}
	if _, err := s.call(ctx, http.MethodGet, in.base()+"/v1/timeshard", s.issue, "", &b); err != nil {
		return nil, err
	}
	m := map[string]int{}
	for _, l := range b.Layouts {
		m[l.Name] = l.Node
	}
	return m, nil
}

// checkNodes checks that the instances hold distinct node IDs of each
// layout, as each reported when it became ready.
func (s *svcCampaign) checkNodes(when string) {
	for _, layout := range []string{"63", "53"} {
		held := map[int]int{}
		for _, in := range s.inst {
			n := in.nodes[layout]
			if other, ok := held[n]; ok {
				s.fail("%s: instances %d and %d both hold node %d of layout %s", when, other, in.idx, n, layout)
			}
			held[n] = in.idx
		}
	}
}

func (s *svcCampaign) createSequence(ctx context.Context, name string) error {
	body := fmt.Sprintf(`{"name":%q,"type":"bigint","start":1,"step":1,"chunk_size":%d,"adaptive":%v}`, name, svcChunk, name == svcAdaptiveSeq)
	code, err := s.call(ctx, http.MethodPost, s.inst[0].base()+"/v1/sequences", s.admin, body, nil)
	if err != nil {
		return fmt.Errorf("service: creating sequence %s: %w", name, err)
	}
	if code != http.StatusCreated {
		return fmt.Errorf("service: creating sequence %s: %d, want 201 (a fresh keyspace)", name, code)
	}
	return nil
}

// startAttack starts in's vegeta attack, until stopAttack.
func (s *svcCampaign) startAttack(in *svcInstance) error {
	var b strings.Builder
	for _, tg := range svcTargets {
		method, path, _ := strings.Cut(tg, " ")
		fmt.Fprintf(&b, "%s %s%s\n\n", method, in.base(), path)
	}
	targets := filepath.Join(s.t.c.dir, fmt.Sprintf("service-i%d.targets", in.idx))
	if err := os.WriteFile(targets, []byte(b.String()), 0o644); err != nil {
		return err
	}
	_ = os.Remove(in.results)
	c, err := startChild(s.t.c.dir, fmt.Sprintf("service-i%d-vegeta", in.idx), s.t.c.vegeta, "attack",
		"-targets", targets, "-rate", strconv.Itoa(svcRate)+"/1s", "-duration", "0", "-timeout", svcClientTimeout.String(),
		"-keepalive=true", "-http2=false", "-header", "Authorization: Bearer "+s.issue, "-output", in.results)
	if err != nil {
		return err
	}
	in.attack = c
	return nil
}

// stopAttack stops an attack as Ctrl-C does (vegeta then writes the
// results of the requests in flight and exits).
func stopAttack(c *child) error {
	select {
	case <-c.done:
		return c.exited()
	default:
	}
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
		return nil
	case <-time.After(30 * time.Second):
		c.kill()
		return errors.New("did not stop on SIGINT within 30 s: SIGKILLed (its last results may be lost)")
	}
}

// decode reads in's results with vegeta encode --to json.
func (s *svcCampaign) decode(ctx context.Context, in *svcInstance) ([]svcResult, error) {
	cmd := exec.CommandContext(ctx, s.t.c.vegeta, "encode", "--to", "json", in.results)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var rs []svcResult
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var perr error
	for sc.Scan() {
		var r svcResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			perr = fmt.Errorf("service: %s: result %d: %w", in.results, len(rs)+1, err)
			break
		}
		r.Instance = in.idx
		rs = append(rs, r)
	}
	_, _ = io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if perr == nil {
		perr = sc.Err()
	}
	if werr != nil {
		return nil, fmt.Errorf("service: vegeta encode %s: %v: %s", in.results, werr, strings.TrimSpace(stderr.String()))
	}
	return rs, perr
}

// kill SIGKILLs in and restarts it after down; the fault lasts until the
// new process is ready.
func (s *svcCampaign) kill(ctx context.Context, in *svcInstance, down time.Duration) error {
	s.t.logf("service: SIGKILL instance %d, restart after %v", in.idx, down)
	f := svcFault{Kind: faultInstanceKill, Instance: in.idx, Began: time.Now()}
	in.proc.kill()
	err := sleep(ctx, down)
	if err == nil {
		err = s.start(ctx, in)
	}
	f.Ended = time.Now()
	s.faults = append(s.faults, f)
	if err == nil {
		s.checkNodes(fmt.Sprintf("after instance %d's restart", in.idx))
	}
	return err
}

// terminate SIGTERMs in: it must exit 0 within its --shutdown-timeout (and
// the leases' release); it is restarted at once and must take the node ID
// of each layout it released (the lowest node no other instance holds:
// nothing else holds a lease, this being the first fault).
func (s *svcCampaign) terminate(ctx context.Context, in *svcInstance) error {
	s.t.logf("service: SIGTERM instance %d (nodes %v), restart at once", in.idx, in.nodes)
	f := svcFault{Kind: faultInstanceTerm, Instance: in.idx, Began: time.Now()}
	defer func() {
		f.Ended = time.Now()
		s.faults = append(s.faults, f)
	}()
	old := in.nodes
	_ = in.proc.cmd.Process.Signal(syscall.SIGTERM)
	// Shutdown waits for the requests in flight (at most the timeout),
	// then releases the leases (timeshard's ReleaseTimeout, 5 s, at most).
	limit := svcShutdownTimeout + 5*time.Second
	select {
	case <-in.proc.done:
	case <-time.After(limit + 10*time.Second):
		in.proc.kill()
		s.fail("instance %d did not exit within %v of SIGTERM (SIGKILLed)", in.idx, limit+10*time.Second)
	}
	took := in.proc.exitedAt.Sub(f.Began)
	if in.proc.err != nil {
		s.fail("instance %d exited with %v after SIGTERM, want 0 (stderr in %s)", in.idx, in.proc.err, in.proc.errOut)
	} else if took > limit {
		s.fail("instance %d took %.1f s to exit after SIGTERM, more than --shutdown-timeout %v and the leases' release", in.idx, took.Seconds(), svcShutdownTimeout)
	}
	restart := time.Now()
	if err := s.start(ctx, in); err != nil {
		return err
	}
	note := fmt.Sprintf("SIGTERM: instance %d exited (%v) in %.2f s, restarted and ready in %.1f s", in.idx, exitStatus(in.proc.err), took.Seconds(), time.Since(restart).Seconds())
	released := true
	for _, layout := range []string{"63", "53"} {
		want := lowestFree(s.inst, in, layout)
		if in.nodes[layout] != want || old[layout] != want {
			released = false
			s.fail("instance %d held node %d of layout %s before SIGTERM and %d after its restart; the lowest node no other instance holds is %d: the lease was not released (or nodes were shared)",
				in.idx, old[layout], layout, in.nodes[layout], want)
		}
	}
	if released {
		note += fmt.Sprintf(", took the nodes it released at once (%v)", in.nodes)
	}
	s.notes = append(s.notes, note)
	s.t.logf("service: %s", note)
	return nil
}

func exitStatus(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// lowestFree is the lowest node ID of layout that no instance but in
// holds.
func lowestFree(inst []*svcInstance, in *svcInstance, layout string) int {
	held := map[int]bool{}
	for _, o := range inst {
		if o != in {
			held[o.nodes[layout]] = true
		}
	}
	n := 0
	for held[n] {
		n++
	}
	return n
}

func fmtWaste(rep *svcReport) string {
	var parts []string
	for _, seq := range svcSequences {
		w := rep.Waste["galloc/"+seq]
		if w == nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d of %d (bound %d)", seq, w.Waste, w.Max, w.Bound))
	}
	return strings.Join(parts, ", ")
}

// printService prints the service phase's table.
func (t *tort) printService() {
	w := t.out
	header := false
	for _, r := range t.rows {
		st := r.service
		if st == nil {
			continue
		}
		if !header {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| service | requests | 2xx | IDs checked | duplicates | bad 2xx bodies | non-2xx by fault / class | unexplained | galloc waste (bound) | faults | verdict |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
			header = true
		}
		rep := st.rep
		counts := map[string]int{}
		for _, f := range st.faults {
			counts[f.Kind]++
		}
		verdict := "OK"
		if len(st.problems) > 0 {
			verdict = "**FAILED**: " + strings.Join(st.problems, "; ")
		}
		fmt.Fprintf(w, "| %s (%.0f s of load) | %d | %d | %d (%s) | %d | %d | %s | %s | %s | %s | %s |\n", r.phase, st.load.Seconds(), rep.Requests, rep.OK, rep.IDs,
			fmtCounts(rep.PerSet), rep.Duplicates, rep.BadBodies, fmtCounts(rep.Explained), fmtCounts(rep.Unexplained), fmtWaste(rep), fmtCounts(counts), verdict)
		for _, f := range st.faults {
			fmt.Fprintf(w, "| | fault: %s | | | | | | | | | |\n", f)
		}
		for _, n := range st.notes {
			fmt.Fprintf(w, "| | %s | | | | | | | | | |\n", n)
		}
	}
}
