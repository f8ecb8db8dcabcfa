package metrics

import (
	"fmt"
)

// lwtOps are the storage operations that are lightweight transactions on
// CQL (ApplyBatchIf is one only with conditions; it is counted always).
var lwtOps = []string{"InsertIfNotExists", "CompareAndSwap", "CompareAndDelete", "ApplyBatchIf"}

// StorageCalls returns the number of storage calls recorded so far by the
// Storage wrappers of c, by operation name ("Get", "CompareAndSwap", ...),
// failed ones included.
func (c *Collectors) StorageCalls() (map[string]uint64, error) {
	mfs, err := c.reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("metrics: gathering: %w", err)
	}
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "cqlseq_storage_call_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" {
					out[l.GetValue()] += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return out, nil
}

// LWTCalls returns the number of conditional storage calls (lightweight
// transactions on CQL) recorded so far by the Storage wrappers of c.
func (c *Collectors) LWTCalls() (uint64, error) {
	calls, err := c.StorageCalls()
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, op := range lwtOps {
		n += calls[op]
	}
	return n, nil
}
