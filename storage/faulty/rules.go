package faulty

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Operation names, as Rule.Ops takes them: the storage.Storage methods.
// Close is never faulted.
const (
	OpGet               = "Get"
	OpGetBatch          = "GetBatch"
	OpPut               = "Put"
	OpPutBatch          = "PutBatch"
	OpRead              = "Read"
	OpReadPartitions    = "ReadPartitions"
	OpInsertIfNotExists = "InsertIfNotExists"
	OpCompareAndSwap    = "CompareAndSwap"
	OpCompareAndDelete  = "CompareAndDelete"
	OpApplyBatchIf      = "ApplyBatchIf"
	OpQueryTTL          = "QueryTTL"
	// OpApplyBatchesIf is storage.MultiApplier's operation, offered by
	// Store.Multi; it is not in AllOps, the contract's.
	OpApplyBatchesIf = "ApplyBatchesIf"
)

// AllOps returns every operation name of the storage contract.
func AllOps() []string {
	return []string{OpGet, OpGetBatch, OpPut, OpPutBatch, OpRead, OpReadPartitions, OpInsertIfNotExists,
		OpCompareAndSwap, OpCompareAndDelete, OpApplyBatchIf, OpQueryTTL}
}

// Action is what a rule does to a call it fires on.
type Action int

const (
	// Fail returns Rule.Err (default storage.ErrUnavailable) wrapped with
	// ErrInjected.
	Fail Action = iota + 1
	// Delay waits Rule.Delay, then lets the call go on. A ctx done during
	// the wait ends the call with ctx's error.
	Delay
	// Timeout blocks until ctx is done (or the Store is closed) and returns
	// ctx's error wrapped with ErrInjected: a store that never answers.
	Timeout
)

func (a Action) String() string {
	switch a {
	case Fail:
		return "Fail"
	case Delay:
		return "Delay"
	case Timeout:
		return "Timeout"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Rule chooses calls and says what happens to them. Rules are tried in
// order for each call; the first that fires decides, later ones are not
// tried.
type Rule struct {
	// Ops are the operation names the rule matches (Op... constants); empty
	// matches every operation.
	Ops []string

	// Action is what the rule does. Required.
	Action Action

	// Probability is the chance, in (0, 1], that the rule fires on a
	// matching call, drawn from the Store's seeded generator. 0 means 1:
	// every matching call.
	Probability float64

	// Times > 0 makes the rule fire Times times at most (on the next Times
	// matching calls when Probability is 1), then go quiet; 0 keeps it
	// firing until the rules are replaced or cleared.
	Times int

	// Err is what a Fail rule returns, wrapped with ErrInjected. Default
	// storage.ErrUnavailable. Only for Fail.
	Err error

	// Delay is how long a Delay rule waits; required for Delay, only for
	// Delay.
	Delay time.Duration

	// CCols, if not nil, limits the rule to calls on this one clustering
	// key (Get, Put, InsertIfNotExists, CompareAndSwap, CompareAndDelete,
	// QueryTTL); it never matches a call without a single clustering key
	// (GetBatch, PutBatch, Read, ApplyBatchIf).
	CCols []byte

	// AfterCall applies the action after the wrapped call has run (and
	// succeeded): the write took effect but the caller sees the fault, as
	// with a reply lost on the way back. A failing wrapped call returns its
	// own error and the action is skipped.
	AfterCall bool
}

func (r *Rule) validate(i int) error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: rule %d: "+format, append([]any{ErrInvalidRule, i}, a...)...))
	}
	all := append(AllOps(), OpApplyBatchesIf)
	for _, op := range r.Ops {
		if !slices.Contains(all, op) {
			bad("unknown operation %q", op)
		}
	}
	switch r.Action {
	case Fail, Delay, Timeout:
	default:
		bad("unknown %v", r.Action)
	}
	if math.IsNaN(r.Probability) || r.Probability < 0 || r.Probability > 1 {
		bad("Probability %v, must be in [0, 1]", r.Probability)
	}
	if r.Times < 0 {
		bad("Times %d, must be >= 0", r.Times)
	}
	if r.Err != nil && r.Action != Fail {
		bad("Err set on a %v rule", r.Action)
	}
	switch {
	case r.Action == Delay && r.Delay <= 0:
		bad("Delay %v, must be > 0 for a Delay rule", r.Delay)
	case r.Action != Delay && r.Delay != 0:
		bad("Delay set on a %v rule", r.Action)
	}
	return errors.Join(errs...)
}

// matches reports whether r applies to a call of op on key (keyed: the
// call has one clustering key).
func (r *Rule) matches(op string, key []byte, keyed bool) bool {
	if len(r.Ops) > 0 && !slices.Contains(r.Ops, op) {
		return false
	}
	return r.CCols == nil || keyed && bytes.Equal(r.CCols, key)
}

// ValidateRules reports every problem of rules at once; each wraps
// ErrInvalidRule.
func ValidateRules(rules []Rule) error {
	var errs []error
	for i := range rules {
		errs = append(errs, rules[i].validate(i))
	}
	return errors.Join(errs...)
}
