package idservice

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cqlseq/cqlseq/galloc"
)

// Meituan Leaf's monitor pages (LeafMonitorController), answered in JSON
// (Leaf renders /cache and /db as HTML pages of the same data). Like the
// ID paths they take any method and a trailing slash, want an issue token
// when there is a token file, and are counted under fixed route labels
// (leaf_cache, leaf_db, leaf_decode). They are read-only: none takes an
// ID; only /db reads the store.

// leafSegmentView is one sequence in /cache: Leaf's SegmentBufferView
// (its field names), then this service's own fields.
//
// Leaf keeps two segment buffers per key and switches to the other when
// the current one is used up (pos is the current one's index). A galloc
// sequence holds the same: the current chunk and the next one, reserved
// ahead once the current is used past its prefetch point. The k-th chunk
// this instance allocated (from 0) is shown in buffer k%2, as Leaf's
// alternation would put it; the other buffer holds the reserved chunk when
// there is one (nextReady), else the chunk before, used up (value = max),
// else zeros.
type leafSegmentView struct {
	Key       string `json:"key"`
	InitOk    bool   `json:"initOk"`    // a chunk was allocated to this instance
	NextReady bool   `json:"nextReady"` // the next chunk is reserved
	Pos       int    `json:"pos"`       // the current buffer: 0 or 1
	Value0    int64  `json:"value0"`    // buffer 0: the next value to hand out (max once used up)
	Max0      int64  `json:"max0"`      // the value after the chunk's last (exclusive; saturated at 2^63-1)
	Step0     uint64 `json:"step0"`     // the chunk's number of values (Leaf's step)
	Value1    int64  `json:"value1"`
	Max1      int64  `json:"max1"`
	Step1     uint64 `json:"step1"`

	Increment int64  `json:"increment"` // the sequence's step: its values are this far apart (Leaf's are 1)
	Issued    uint64 `json:"issued"`    // values this instance handed out
	Held      uint64 `json:"held"`      // values this instance holds, not handed out yet
	// CurrentStep is the size of the last chunk this instance allocated:
	// an adaptive sequence's current step (Leaf's dynamic step), else the
	// chunk size; 0 before the first.
	CurrentStep int64 `json:"currentStep"`
	// Retired: this instance has seen the sequence retired and hands out
	// none of its values (the buffers show what it held then).
	Retired bool `json:"retired"`
}

// leafSegment is one of Leaf's segment buffers.
type leafSegment struct {
	value, max int64
	step       uint64
}

// segmentOf is chunk c seen as Leaf's segment, used values of it handed
// out (used <= c.Count), its values inc apart.
func segmentOf(c galloc.Chunk, used uint64, inc int64) leafSegment {
	if c.Count == 0 {
		return leafSegment{}
	}
	// The chunk's values lie within its type: the sum wraps to the exact
	// last value, as galloc.Record.Value computes it.
	last := c.First + int64(c.Count-1)*inc
	end := int64(math.MaxInt64)
	if last <= math.MaxInt64-inc {
		end = last + inc
	}
	seg := leafSegment{value: end, max: end, step: c.Count}
	if used < c.Count {
		seg.value = c.First + int64(used)*inc
	}
	return seg
}

// leafCacheOf returns what this instance holds of sequence q, named name.
// The current chunk is found from the values issued: chunks are handed out
// in their allocation order, so the current one is the first whose values
// are not all issued (the last one when all are).
func leafCacheOf(name string, q *galloc.Sequence) leafSegmentView {
	st := q.Stats()
	chunks := q.Chunks() // after Stats: every chunk Stats counted is here
	inc := q.Definition().Step
	v := leafSegmentView{Key: name, Increment: inc, Issued: st.Issued, Held: st.Held, CurrentStep: st.ChunkSize, Retired: st.Retired}
	if len(chunks) == 0 {
		return v
	}
	k, used, done := -1, uint64(0), uint64(0)
	for i, c := range chunks {
		if st.Issued-done < c.Count {
			k, used = i, st.Issued-done
			break
		}
		done += c.Count
	}
	if k < 0 {
		k = len(chunks) - 1
		used = chunks[k].Count
	}
	var segs [2]leafSegment
	segs[k%2] = segmentOf(chunks[k], used, inc)
	switch {
	case k+1 < len(chunks):
		segs[(k+1)%2] = segmentOf(chunks[k+1], 0, inc)
		v.NextReady = true
	case k > 0:
		segs[(k+1)%2] = segmentOf(chunks[k-1], chunks[k-1].Count, inc)
	}
	v.InitOk, v.Pos = true, k%2
	v.Value0, v.Max0, v.Step0 = segs[0].value, segs[0].max, segs[0].step
	v.Value1, v.Max1, v.Step1 = segs[1].value, segs[1].max, segs[1].step
	return v
}

// handleLeafCache is Leaf's /cache: every sequence this instance has open
// (it has served or created it since it started), by key, as
// leafSegmentView. It makes no store call. Leaf lists every biz_tag of its
// table; a store has no list of its sequences (each is its own partition),
// so a sequence this instance never opened is not shown.
func (s *Service) handleLeafCache(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	seqs := s.sequences()
	out := make(map[string]leafSegmentView, len(seqs))
	for name, q := range seqs {
		out[name] = leafCacheOf(name, q)
	}
	writeLeafJSON(w, http.StatusOK, out)
	return nil
}

// leafAllocView is one row of /db: Leaf's leaf_alloc row (LeafAlloc's
// field names) from the sequence's stored record.
type leafAllocView struct {
	Key string `json:"key"`
	// MaxID is the first value not allocated yet, where the next chunk
	// starts (Leaf's max_id); null once the sequence is exhausted.
	MaxID *int64 `json:"maxId"`
	// Step is the chunk size (Leaf's step: the values a segment takes).
	Step int64 `json:"step"`
	// UpdateTime is the last allocation's time (UTC); null before any.
	UpdateTime *time.Time `json:"updateTime"`
	// Description is the sequence's definition (Leaf's free text).
	Description string `json:"description"`
	// Exhausted: every value of the sequence's type is allocated.
	Exhausted bool `json:"exhausted"`
	// Retired: the sequence hands out no more values (DELETE
	// /v1/sequences/{name}); Leaf's paths answer it as an unknown key.
	Retired bool `json:"retired"`
	// Adaptive: chunks follow Leaf's dynamic step from Step up to
	// galloc.MaxAdaptiveChunkSize (/cache's currentStep is the current one).
	Adaptive bool `json:"adaptive"`
}

// handleLeafDB is Leaf's /db: the stored record of every sequence of the
// store, as Leaf lists its leaf_alloc table, by key, as leafAllocView,
// read from the store now (galloc.List, a page of galloc.MaxListLimit
// names per read; retired sequences included, marked). A failed read
// fails the request (Leaf's error body; the store unavailable is 500 with
// the API's code unavailable).
func (s *Service) handleLeafDB(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	out := []leafAllocView{}
	for after := ""; ; {
		page, next, err := galloc.List(ctx, s.st, after, galloc.MaxListLimit)
		if err != nil {
			return fmt.Errorf("idservice: listing sequences: %w", err)
		}
		for _, l := range page {
			out = append(out, leafAllocOf(l.Name, l.Record))
		}
		if next == "" {
			break
		}
		after = next
	}
	writeLeafJSON(w, http.StatusOK, out)
	return nil
}

// leafAllocOf is sequence name's /db row from its record rec.
func leafAllocOf(name string, rec galloc.Record) leafAllocView {
	v := leafAllocView{Key: name, Step: rec.ChunkSize, Exhausted: rec.Exhausted(), Retired: rec.Retired, Adaptive: rec.Adaptive,
		Description: fmt.Sprintf("%s sequence: start %d, step %d", rec.Type, rec.Start, rec.Step)}
	if next, ok := rec.AllocatedUpTo(); ok {
		v.MaxID = &next
	}
	if !rec.LastAlloc.IsZero() {
		t := rec.LastAlloc.UTC()
		v.UpdateTime = &t
	}
	return v
}

// leafDecodeFailed is Leaf's errorMsg for an ID it cannot decode.
const leafDecodeFailed = "snowflake Id反解析失败"

// missingParam is Spring's answer to a request without a required
// parameter: 400, MissingServletRequestParameterException, its message.
func missingParam(name string) *apiError {
	ae := newError(http.StatusBadRequest, CodeBadRequest, "Required String parameter '%s' is not present", name)
	ae.exception = "org.springframework.web.bind.MissingServletRequestParameterException"
	return ae
}

// handleLeafDecode is Leaf's /decodeSnowflakeId?snowflakeId=N: the ID's
// fields in the snowflake path's layout (63), as Leaf's map of strings:
//
//	{"timestamp":"1764302353139(2025-11-28 03:59:13)","workerId":"3","sequenceId":"0"}
//
// timestamp is milliseconds since the Unix epoch and that time as
// yyyy-MM-dd HH:mm:ss, in UTC (Leaf: the server's zone); workerId is the
// node, sequenceId the counter. Without the parameter it is Spring's 400.
// An N that is not an ID of the layout (not a whole number, negative,
// above its largest) is answered as Leaf answers a number it cannot parse:
// 200 with {"errorMsg": "snowflake Id反解析失败: ..."}, the reason after
// Leaf's text. A repeated parameter is joined with commas, as Spring joins
// it, and so fails.
func (s *Service) handleLeafDecode(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	vs, ok := r.URL.Query()["snowflakeId"]
	if !ok {
		return missingParam("snowflakeId")
	}
	raw := strings.Join(vs, ",")
	l := s.layouts[leafLayout].layout
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 0 || id > l.MaxID() {
		shown := raw
		if len(shown) > 40 {
			shown = shown[:40] + "..."
		}
		writeLeafJSON(w, http.StatusOK, map[string]string{"errorMsg": fmt.Sprintf(
			"%s: %q is not an ID of layout %s (want a whole number from 0 to %d)", leafDecodeFailed, shown, leafLayout, l.MaxID())})
		return nil
	}
	t := l.Time(id).UTC()
	writeLeafJSON(w, http.StatusOK, map[string]string{
		"timestamp":  strconv.FormatInt(t.UnixMilli(), 10) + "(" + t.Format(time.DateTime) + ")",
		"workerId":   strconv.FormatUint(uint64(l.Node(id)), 10),
		"sequenceId": strconv.FormatUint(l.Counter(id), 10),
	})
	return nil
}
