package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The service phase's checker: it reads every response vegeta recorded
// (vegeta encode --to json: one object a line) and judges them against the
// faults the phase injected. Pure: unit tested with planted defects.

// svcResult is one response (or transport error) vegeta recorded, with
// the instance its attack targeted.
type svcResult struct {
	Instance  int       `json:"-"`
	Code      int       `json:"code"`
	Timestamp time.Time `json:"timestamp"`
	Latency   int64     `json:"latency"` // nanoseconds
	Error     string    `json:"error"`
	Body      []byte    `json:"body"` // base64 in vegeta's JSON
	Method    string    `json:"method"`
	URL       string    `json:"url"`
}

// Kinds of the service phase's faults.
const (
	faultInstanceKill = "instance SIGKILL"
	faultInstanceTerm = "instance SIGTERM"
	faultNodeKill     = "node SIGKILL"
	faultNodePause    = "node SIGSTOP"
)

// svcFault is one fault's window: from its injection to the end of its
// recovery (the restarted instance ready, the node back). Instance is the
// instance faulted (1-based; 0 for a node fault), Node the node.
type svcFault struct {
	Kind         string
	Instance     int
	Node         int
	Began, Ended time.Time
}

func (f svcFault) String() string {
	what := fmt.Sprintf("instance %d", f.Instance)
	if f.Instance == 0 {
		what = fmt.Sprintf("node %d", f.Node)
	}
	return fmt.Sprintf("%s of %s at %s for %.1f s", f.Kind, what, f.Began.Format("15:04:05.000"), f.Ended.Sub(f.Began).Seconds())
}

func (f svcFault) nodeFault() bool { return f.Kind == faultNodeKill || f.Kind == faultNodePause }

// svcCheckConfig is what the checker needs besides the results.
type svcCheckConfig struct {
	// Sequences are the galloc sequences (all start at 1, step 1).
	Sequences []string
	// ChunkSize is every sequence's chunk size.
	ChunkSize int64
	// Starts is the number of instance processes started (each holds at
	// most two chunks of a sequence: galloc's bound of what it wastes).
	Starts int
	// Grace extends every fault's window past its end: for an instance
	// fault, vegeta's connections of the old process; for a node fault,
	// the drivers reconnecting and the leases taken again.
	InstanceGrace, NodeGrace time.Duration
	// MaxChunk is, per sequence, the largest chunk it may have had (its
	// chunk size altered during the load, or adaptive: up to
	// galloc.MaxAdaptiveChunkSize); ChunkSize for one not listed.
	MaxChunk map[string]int64
	// Retired are the sequences retired during the load (svcRetire).
	Retired map[string]svcRetire
	// RetireGrace is how long after a retirement's acknowledgement an
	// instance that did not serve it may still hand out the values it
	// holds: the service's --probe-interval and a request's time.
	RetireGrace time.Duration
}

// svcRetire is when a sequence's retirement (DELETE
// /v1/sequences/{name}) was sent and when its 200 came back.
type svcRetire struct {
	Sent, Acked time.Time
}

// chunkOf is the largest chunk of sequence name.
func (c svcCheckConfig) chunkOf(name string) int64 {
	if n, ok := c.MaxChunk[name]; ok {
		return n
	}
	return c.ChunkSize
}

// svcWaste is one galloc sequence's waste.
type svcWaste struct {
	Handed     int64 // distinct values handed out
	Min, Max   int64
	Waste      int64 // Max - 1 + 1 - Handed: values below Max never handed out
	Unanswered int64 // values asked for by requests that got no answer (a transport error after sending)
	Bound      int64 // 2 chunks per instance start + Unanswered
}

// svcReport is the checker's verdict.
type svcReport struct {
	Requests   int
	OK         int            // 2xx
	IDs        int            // IDs read from 2xx bodies
	PerSet     map[string]int // IDs per set (galloc/NAME, timeshard/LAYOUT)
	PerRoute   map[string]int // requests per route kind
	Duplicates int
	// BadBodies are 2xx answers that are not what the route answers (not
	// parsed, fewer or more IDs than asked for).
	BadBodies int
	// Explained counts the non-2xx answers and transport errors per
	// (fault kind, class); Unexplained those inside no fault window that
	// explains them, per class.
	Explained   map[string]int
	Unexplained map[string]int
	Waste       map[string]*svcWaste
	// AfterRetire counts 2xx answers of a retired sequence to requests
	// sent more than RetireGrace after its retirement was acknowledged.
	AfterRetire int
	// Examples of each violation (at most a few each).
	Examples []string
}

const svcMaxExamples = 12

func (r *svcReport) example(format string, a ...any) {
	if len(r.Examples) < svcMaxExamples {
		r.Examples = append(r.Examples, fmt.Sprintf(format, a...))
	}
}

// Problems are the violations found: none means the check passed.
func (r *svcReport) Problems() []string {
	var bad []string
	if r.Duplicates > 0 {
		bad = append(bad, fmt.Sprintf("%d IDs handed out twice", r.Duplicates))
	}
	if r.AfterRetire > 0 {
		bad = append(bad, fmt.Sprintf("%d values of a retired sequence handed out after its retirement had reached every instance", r.AfterRetire))
	}
	if r.BadBodies > 0 {
		bad = append(bad, fmt.Sprintf("%d 2xx bodies not as the route answers", r.BadBodies))
	}
	if n := sumCounts(r.Unexplained); n > 0 {
		bad = append(bad, fmt.Sprintf("%d non-2xx answers or errors no fault explains (%s)", n, fmtCounts(r.Unexplained)))
	}
	for _, s := range slices.Sorted(maps.Keys(r.Waste)) {
		if w := r.Waste[s]; w.Waste > w.Bound {
			bad = append(bad, fmt.Sprintf("%s wasted %d values, above the bound %d", s, w.Waste, w.Bound))
		}
	}
	if r.OK == 0 {
		bad = append(bad, "no 2xx answer at all")
	}
	return bad
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// fmtCounts is "key: n, key: n" in key order ("none" when empty).
func fmtCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// svcTarget is what a request asked for: the set its IDs belong to, how
// many, and whether the answer is Leaf's plain text.
type svcTarget struct {
	route string // galloc, timeshard, leaf_segment, leaf_snowflake
	set   string // galloc/NAME or timeshard/LAYOUT
	count int
	leaf  bool
}

// parseSvcTarget reads a request's URL.
func parseSvcTarget(method, raw string) (svcTarget, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return svcTarget{}, err
	}
	p := strings.Split(strings.Trim(u.Path, "/"), "/")
	count := 1
	if c := u.Query().Get("count"); c != "" {
		if count, err = strconv.Atoi(c); err != nil || count < 1 {
			return svcTarget{}, fmt.Errorf("count %q", c)
		}
	}
	switch {
	case len(p) == 4 && p[0] == "v1" && p[1] == "sequences" && p[3] == "next" && method == "POST":
		return svcTarget{route: "galloc", set: "galloc/" + p[2], count: count}, nil
	case len(p) == 4 && p[0] == "v1" && p[1] == "timeshard" && p[3] == "next" && method == "POST":
		return svcTarget{route: "timeshard", set: "timeshard/" + p[2], count: count}, nil
	case len(p) == 4 && p[0] == "api" && p[1] == "segment" && p[2] == "get" && method == "GET":
		return svcTarget{route: "leaf_segment", set: "galloc/" + p[3], count: 1, leaf: true}, nil
	case len(p) == 4 && p[0] == "api" && p[1] == "snowflake" && p[2] == "get" && method == "GET":
		// idservice's leafLayout: Leaf's snowflake IDs are the 63-bit
		// layout's, one ID space with /v1/timeshard/63/next.
		return svcTarget{route: "leaf_snowflake", set: "timeshard/63", count: 1, leaf: true}, nil
	}
	return svcTarget{}, fmt.Errorf("not a route the campaign loads: %s %s", method, u.Path)
}

// parseIDs reads a 2xx body: {"ids":[...]} or Leaf's plain-text ID.
func parseIDs(tg svcTarget, body []byte) ([]int64, error) {
	if tg.leaf {
		id, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("leaf body %q: %w", clip(body), err)
		}
		return []int64{id}, nil
	}
	var b struct {
		IDs []int64 `json:"ids"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("body %q: %w", clip(body), err)
	}
	if len(b.IDs) != tg.count {
		return nil, fmt.Errorf("%d IDs, asked for %d", len(b.IDs), tg.count)
	}
	return b.IDs, nil
}

func clip(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// errorClass names a non-2xx answer or a transport error: "503
// unavailable", "500 leaf no_node_lease", "refused", "reset", "eof",
// "timeout" or "transport: MESSAGE".
func errorClass(r svcResult) string {
	if r.Code == 0 {
		e := r.Error
		switch {
		case strings.Contains(e, "connection refused"):
			return "refused"
		case strings.Contains(e, "connection reset"), strings.Contains(e, "broken pipe"):
			return "reset"
		case strings.HasSuffix(e, "EOF"), strings.Contains(e, "server closed idle connection"):
			return "eof"
		case strings.Contains(e, "Client.Timeout"), strings.Contains(e, "deadline exceeded"), strings.Contains(e, "timeout"):
			return "timeout"
		}
		return "transport: " + e
	}
	var b struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(r.Body, &b)
	if b.Code == "" {
		b.Code = "?"
	}
	if r.Code == 500 && strings.Contains(string(r.Body), `"message":"Result{`) {
		return "500 leaf " + b.Code
	}
	return strconv.Itoa(r.Code) + " " + b.Code
}

// explains reports whether a fault of kind explains an answer of class
// on the instance it hit (the instance's own fault) or on any instance (a
// node fault).
func explains(f svcFault, class string, sameInstance bool) bool {
	// The service's retryable refusals: the store unreachable or slow,
	// a node lease being taken again, shutting down (a 503; a 500 with
	// Leaf's "no segment" on the Leaf paths).
	retryable := func(codes ...string) bool {
		for _, c := range codes {
			if class == "503 "+c || class == "500 leaf "+c {
				return true
			}
		}
		return false
	}
	if f.nodeFault() {
		// Any instance: the store unreachable or slow, a lease lost
		// while the node was gone, the client's 2 s timeout.
		return retryable("unavailable", "no_node_lease") || class == "timeout"
	}
	if !sameInstance {
		return false
	}
	switch class {
	case "refused", "reset", "eof", "timeout":
		// Killed or closing: connections refused, cut, or accepted by
		// the restarted process's listener before it serves.
		return true
	}
	// Shutting down (SIGTERM), or the restarted process not ready.
	return retryable("shutting_down", "unavailable", "no_node_lease")
}

// checkService judges results against faults.
func checkService(results []svcResult, faults []svcFault, cfg svcCheckConfig) *svcReport {
	r := &svcReport{PerSet: map[string]int{}, PerRoute: map[string]int{}, Explained: map[string]int{}, Unexplained: map[string]int{}, Waste: map[string]*svcWaste{}}
	type origin struct {
		instance int32
		at       int64 // unix ms
	}
	seen := map[string]map[int64]origin{}
	unanswered := map[string]int64{}
	for _, res := range results {
		r.Requests++
		tg, err := parseSvcTarget(res.Method, res.URL)
		if err != nil {
			r.BadBodies++
			r.example("instance %d: %v", res.Instance, err)
			continue
		}
		r.PerRoute[tg.route]++
		if res.Code >= 200 && res.Code < 300 {
			r.OK++
			ids, err := parseIDs(tg, res.Body)
			if err != nil {
				r.BadBodies++
				r.example("instance %d %s %s at %s: %v", res.Instance, res.Method, res.URL, res.Timestamp.Format("15:04:05.000"), err)
				continue
			}
			if rt, ok := cfg.Retired[strings.TrimPrefix(tg.set, "galloc/")]; ok && strings.HasPrefix(tg.set, "galloc/") &&
				res.Timestamp.After(rt.Acked.Add(cfg.RetireGrace)) {
				r.AfterRetire++
				r.example("instance %d %s %s at %s: 2xx, %.1f s after %s's retirement was acknowledged", res.Instance, res.Method, res.URL,
					res.Timestamp.Format("15:04:05.000"), res.Timestamp.Sub(rt.Acked).Seconds(), tg.set)
			}
			set := seen[tg.set]
			if set == nil {
				set = map[int64]origin{}
				seen[tg.set] = set
			}
			for _, id := range ids {
				r.IDs++
				r.PerSet[tg.set]++
				if o, dup := set[id]; dup {
					r.Duplicates++
					r.example("%s ID %d twice: instance %d at %s and instance %d at %s", tg.set, id,
						o.instance, time.UnixMilli(o.at).Format("15:04:05.000"), res.Instance, res.Timestamp.Format("15:04:05.000"))
					continue
				}
				set[id] = origin{instance: int32(res.Instance), at: res.Timestamp.UnixMilli()}
			}
			continue
		}
		class := errorClass(res)
		if res.Code == 0 && class != "refused" && strings.HasPrefix(tg.set, "galloc/") {
			// Sent, no answer: the values may have been taken.
			unanswered[tg.set] += int64(tg.count)
		}
		begin, end := res.Timestamp, res.Timestamp.Add(time.Duration(res.Latency))
		if rt, ok := cfg.Retired[strings.TrimPrefix(tg.set, "galloc/")]; ok && strings.HasPrefix(tg.set, "galloc/") &&
			(class == "410 sequence_retired" || class == "500 leaf sequence_retired") && !end.Before(rt.Sent) {
			r.Explained["retire / "+class]++
			continue
		}
		explained := ""
		for _, f := range faults {
			grace := cfg.InstanceGrace
			if f.nodeFault() {
				grace = cfg.NodeGrace
			}
			if end.Before(f.Began) || begin.After(f.Ended.Add(grace)) {
				continue
			}
			if explains(f, class, f.Instance == res.Instance) {
				explained = f.Kind
				break
			}
		}
		if explained == "" {
			r.Unexplained[class]++
			r.example("instance %d %s %s at %s: %s (%s) inside no fault window that explains it", res.Instance, res.Method, res.URL,
				res.Timestamp.Format("15:04:05.000"), class, clip([]byte(res.Error)))
			continue
		}
		r.Explained[explained+" / "+class]++
	}
	for _, s := range cfg.Sequences {
		set := "galloc/" + s
		w := &svcWaste{Unanswered: unanswered[set], Bound: 2*cfg.chunkOf(s)*int64(cfg.Starts) + unanswered[set]}
		ids := seen[set]
		if len(ids) > 0 {
			w.Min, w.Max = int64(^uint64(0)>>1), 0
			for id := range ids {
				w.Min, w.Max = min(w.Min, id), max(w.Max, id)
			}
			w.Handed = int64(len(ids))
			w.Waste = w.Max - w.Handed // values 1..Max not handed out
		}
		r.Waste[set] = w
	}
	return r
}
