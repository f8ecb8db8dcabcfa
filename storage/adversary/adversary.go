// Package adversary is the storage contract's allowances in executable
// form: a seeded adversary over one shared store that does, at random,
// everything storage.Storage allows a store to do and nothing more. A
// simulation runs the code of several processes (successive owners of a
// partition) over one Core, each through its own Client, and then checks
// its invariants.
//
// Each allowance of the contract (see storage.Storage), the adversary's
// action that plays it, and the Options field giving its chance per call
// (default):
//
//	contract allows                          adversary does                                    Options (default)
//	---------------------------------------  ------------------------------------------------  -------------------
//	a write's answer lost after it applied   Put/PutBatch applied, answer ErrUnavailable       WriteLost (0.05)
//	a failed unconditional write lands       nothing now, every row held; a held write lands   WriteHeld (0.05)
//	  later, after any calls of any client,    before a later call of any client (Deliver),
//	  or never                                 at DeliverSome or DeliverAll, or never (Drop)
//	  ... in any subset of its rows          a random subset now, the rest held, each row      WritePartial (0.05)
//	  (all or none on a MultiApplier store)    on its own (not with Options.Multi)
//	a conditional write's answer lost        applied, answer ErrUnknownOutcome                 CondLost (0.05)
//	an unknown outcome takes effect later,   not applied now, answer ErrUnknownOutcome, held;  CondHeld (0.05)
//	  judged then, or never                    judged against the state when it lands
//	a write not sent never applies           not applied, answer ErrUnavailable                CondNotSent (0.05)
//	a read fails                             ErrUnavailable (Read, ReadPartitions: after       ReadFail (0.05)
//	                                           0 to 3 rows passed to the callback)
//	late writes land between other calls     one held write lands before a call                Deliver (0.05)
//	a failed write may never land            DeliverAll drops a held write for ever            Drop (0.25)
//	a read sees every acknowledged write     reads see the inner store: held writes are
//	  and any subset of the others             invisible until they land
//	a late lower version replaces nothing    held rows keep their Version: the inner store
//	                                           orders them when they land
//	a call with a done ctx fails             an error wrapping ctx.Err(); nothing done
//	invalid arguments are refused            passed to the inner store untouched
//
// A conditional write answered without an error reports ok == true only
// if this call applied it, ok == false only if it did not; one applied
// with its answer lost, or held, answers an error. Held writes keep copies
// of the caller's bytes. Writes (and held writes landing) run on the inner
// store under the Core's lock, one at a time; reads run outside it, so
// that a Read callback may call the store.
//
// Every choice is drawn from one generator seeded by Options.Seed, under
// the Core's lock: the same seed and the same sequence of calls give the
// same choices. Options.Quiet switches every choice off: the clients then
// behave exactly like the inner store.
//
// Beside the allowances, a Client models its process's death: Crash, and
// a crash right after a write the adversary faulted (CrashAfterFaults,
// CrashAfterFault), the moment a simulation most wants a process to die:
// it sends nothing more, and what it sent may still land.
//
// Options.Multi picks the flavour. With it, a Client is a
// storage.MultiApplier (when the inner store is one), as an embedded store
// is: PutBatch and ApplyBatchesIf are one transaction, all rows or none,
// also when held. Without it, a Client is not a MultiApplier, as a CQL
// store is not: a failed PutBatch may land in any subset of its rows, each
// held row on its own.
package adversary

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/cqlseq/cqlseq/storage"
)

var (
	// ErrInvalidOptions wraps every problem found in Options. It wraps
	// storage.ErrInvalidArgument.
	ErrInvalidOptions = fmt.Errorf("adversary: invalid options: %w", storage.ErrInvalidArgument)

	// ErrInjected wraps every error the adversary makes up for a call (a
	// lost answer, a held write, a write not sent, a failed read).
	ErrInjected = errors.New("adversary: injected")

	// ErrCrashed is the error of every call of a crashed Client. It wraps
	// storage.ErrUnavailable.
	ErrCrashed = fmt.Errorf("adversary: client crashed: %w", storage.ErrUnavailable)
)

// Never is a probability that switches its allowance off (any negative
// value does; 0 takes the default).
const Never = -1.0

// Options configure a Core. Each probability is the chance, per call it
// applies to, that the adversary takes that allowance; 0 takes the
// default (see the package doc), a negative value (Never) is never. The
// allowances of one kind of call are exclusive outcomes of one draw, so
// WriteLost+WriteHeld+WritePartial and CondLost+CondHeld+CondNotSent must
// each be at most 1.
type Options struct {
	// Seed seeds every choice.
	Seed int64

	// Quiet switches the adversary off: every call goes to the inner store
	// as it is, nothing is drawn or held. Crash and Close still work.
	Quiet bool

	// Multi makes each Client a storage.MultiApplier (delegating to the
	// inner store's), the embedded-store flavour: PutBatch and
	// ApplyBatchesIf are one transaction, all rows or none, also when held,
	// and WritePartial is not taken. Without it, the CQL flavour: no
	// MultiApplier, and a failed PutBatch may land in any subset of its
	// rows.
	Multi bool

	// Unconditional writes (Put, PutBatch) answer an error wrapping
	// storage.ErrUnavailable after: WriteLost, applying every row;
	// WriteHeld, applying none now and holding them all; WritePartial,
	// applying a random subset now and holding the rest (CQL flavour, a
	// PutBatch of two rows or more).
	WriteLost, WriteHeld, WritePartial float64

	// Conditional writes (InsertIfNotExists, CompareAndSwap,
	// CompareAndDelete, ApplyBatchIf, ApplyBatchesIf): CondLost applies the
	// write and answers an error wrapping storage.ErrUnknownOutcome;
	// CondHeld holds it (judged when it lands) and answers
	// ErrUnknownOutcome; CondNotSent answers an error wrapping
	// storage.ErrUnavailable and never applies it.
	CondLost, CondHeld, CondNotSent float64

	// ReadFail fails a read (Get, GetBatch, Read, ReadPartitions,
	// QueryTTL) with an error wrapping storage.ErrUnavailable; a Read or
	// ReadPartitions first passes 0 to 3 rows to its callback.
	ReadFail float64

	// Deliver is the chance that one held write (chosen at random) lands
	// at the start of a call of any client, before the call.
	Deliver float64

	// Drop is the chance that DeliverAll drops a held write for ever
	// instead of applying it.
	Drop float64
}

type prob struct {
	name string
	p    *float64
	def  float64
}

func (o *Options) probs() []prob {
	return []prob{
		{"WriteLost", &o.WriteLost, 0.05}, {"WriteHeld", &o.WriteHeld, 0.05}, {"WritePartial", &o.WritePartial, 0.05},
		{"CondLost", &o.CondLost, 0.05}, {"CondHeld", &o.CondHeld, 0.05}, {"CondNotSent", &o.CondNotSent, 0.05},
		{"ReadFail", &o.ReadFail, 0.05}, {"Deliver", &o.Deliver, 0.05}, {"Drop", &o.Drop, 0.25},
	}
}

// EnsureDefaults sets every zero probability to its default (see the
// package doc).
func (o *Options) EnsureDefaults() {
	for _, p := range o.probs() {
		if *p.p == 0 {
			*p.p = p.def
		}
	}
}

// Validate reports every problem of o at once; each wraps
// ErrInvalidOptions.
func (o *Options) Validate() error {
	var errs []error
	for _, p := range o.probs() {
		if math.IsNaN(*p.p) || *p.p > 1 {
			errs = append(errs, fmt.Errorf("%w: %s %v, must be at most 1 (negative: never)", ErrInvalidOptions, p.name, *p.p))
		}
	}
	if s := chance(o.WriteLost) + chance(o.WriteHeld) + chance(o.WritePartial); s > 1 {
		errs = append(errs, fmt.Errorf("%w: WriteLost+WriteHeld+WritePartial is %v, must be at most 1", ErrInvalidOptions, s))
	}
	if s := chance(o.CondLost) + chance(o.CondHeld) + chance(o.CondNotSent); s > 1 {
		errs = append(errs, fmt.Errorf("%w: CondLost+CondHeld+CondNotSent is %v, must be at most 1", ErrInvalidOptions, s))
	}
	return errors.Join(errs...)
}

// chance is p as a probability: a negative p is 0.
func chance(p float64) float64 { return max(p, 0) }

// Stats count the adversary's actions.
type Stats struct {
	Calls     uint64 // client calls the adversary played (not counting the four below)
	Passed    uint64 // calls passed to the inner store untouched in Quiet mode
	Invalid   uint64 // calls with invalid arguments, passed to the inner store untouched
	Refused   uint64 // calls of crashed clients (ErrCrashed)
	Cancelled uint64 // calls whose ctx was done

	WriteOK, WriteLost, WriteHeld, WritePartial uint64 // unconditional writes, by allowance
	CondOK, CondLost, CondHeld, CondNotSent     uint64 // conditional writes, by allowance
	ReadOK, ReadFailed                          uint64 // reads

	Landed           uint64 // held writes applied (late), by any means
	LandedBeforeCall uint64 // of Landed, at the start of a call (Options.Deliver)
	Dropped          uint64 // held writes DeliverAll dropped for ever
}

// traceLen is how many entries Trace keeps.
const traceLen = 200

// Core is one shared store (a "cluster") and the adversary's state: the
// inner storage, the seeded choices and the writes held back to be applied
// later. Safe for concurrent use.
type Core struct {
	inner storage.Storage
	o     Options
	mu    struct {
		sync.Mutex
		rng    *rand.Rand
		held   []*held
		ids    uint64 // held writes so far
		stats  Stats
		trace  []string // a ring of traceLen entries once full
		events uint64   // entries traced so far
		closed bool
	}
}

// held is a write held back: land applies it to the inner store.
type held struct {
	id   uint64
	desc string
	land func(ctx context.Context) (applied bool, err error)
}

// New returns a Core over inner (normally a *mem.Store). It fails only for
// invalid options or a nil inner.
func New(inner storage.Storage, o Options) (*Core, error) {
	o.EnsureDefaults()
	err := o.Validate()
	if inner == nil {
		err = errors.Join(err, fmt.Errorf("%w: inner Storage is nil", ErrInvalidOptions))
	}
	if err != nil {
		return nil, err
	}
	c := &Core{inner: inner, o: o}
	c.mu.rng = rand.New(rand.NewPCG(uint64(o.Seed), 0x9e3779b97f4a7c15))
	return c, nil
}

// Client returns the view of the core of one process, named name in the
// trace. Every call of it goes through the adversary. With Options.Multi
// the Client is also a storage.MultiApplier.
func (c *Core) Client(name string) Client {
	cl := &client{core: c, name: name}
	if c.o.Multi {
		return &multiClient{cl}
	}
	return cl
}

// Held returns how many writes are held now (a held PutBatch of the CQL
// flavour counts once per row).
func (c *Core) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.held)
}

// Stats returns the counts of each action taken so far.
func (c *Core) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.stats
}

// Trace returns the last actions taken (up to 200), oldest first: every
// fault, hold, landing, drop and crash, with the number of the call it
// happened at. Normal calls are not traced.
func (c *Core) Trace() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mu.trace) < traceLen {
		return append([]string(nil), c.mu.trace...)
	}
	i := int(c.mu.events % traceLen)
	return append(append([]string(nil), c.mu.trace[i:]...), c.mu.trace[:i]...)
}

// DeliverSome applies a random subset (possibly empty) of the held writes
// now, in a random order; the others stay held.
func (c *Core) DeliverSome() {
	c.mu.Lock()
	defer c.mu.Unlock()
	hs := c.mu.held
	c.mu.held = nil
	c.mu.rng.Shuffle(len(hs), func(i, j int) { hs[i], hs[j] = hs[j], hs[i] })
	for _, h := range hs {
		if c.mu.rng.IntN(2) == 0 {
			c.mu.held = append(c.mu.held, h)
			continue
		}
		c.landLocked(h, "delivered:")
	}
}

// DeliverAll applies every held write, in a random order, or drops it for
// ever (Options.Drop): a write whose answer was an error may never land.
// Nothing is held afterwards. A simulation calls it before its final
// check.
func (c *Core) DeliverAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	hs := c.mu.held
	c.mu.held = nil
	c.mu.rng.Shuffle(len(hs), func(i, j int) { hs[i], hs[j] = hs[j], hs[i] })
	for _, h := range hs {
		if c.mu.rng.Float64() < chance(c.o.Drop) {
			c.mu.stats.Dropped++
			c.traceLocked("dropped h%d %s", h.id, h.desc)
			continue
		}
		c.landLocked(h, "delivered:")
	}
}

// Close discards the held writes and closes the inner store; every later
// call of a client returns storage.ErrClosed.
func (c *Core) Close() error {
	c.mu.Lock()
	c.mu.closed = true
	c.mu.held = nil
	c.mu.Unlock()
	return c.inner.Close()
}

// landLocked applies h to the inner store (its sender may be long gone:
// the write was on its way).
func (c *Core) landLocked(h *held, how string) {
	applied, err := h.land(context.Background())
	c.mu.stats.Landed++
	switch {
	case err != nil:
		c.traceLocked("%s h%d %s: %v", how, h.id, h.desc, err)
	default:
		c.traceLocked("%s h%d %s: applied=%v", how, h.id, h.desc, applied)
	}
}

// landOneLocked is allowance 4: before a call, one held write may land.
func (c *Core) landOneLocked() {
	if len(c.mu.held) == 0 || c.mu.rng.Float64() >= chance(c.o.Deliver) {
		return
	}
	i := c.mu.rng.IntN(len(c.mu.held))
	h := c.mu.held[i]
	c.mu.held = append(c.mu.held[:i], c.mu.held[i+1:]...)
	c.mu.stats.LandedBeforeCall++
	c.landLocked(h, "landed before the call:")
}

// holdLocked holds a write; it returns its id.
func (c *Core) holdLocked(desc string, land func(ctx context.Context) (bool, error)) uint64 {
	c.mu.ids++
	c.mu.held = append(c.mu.held, &held{id: c.mu.ids, desc: desc, land: land})
	return c.mu.ids
}

// pickLocked draws one of the exclusive allowances ps (probabilities):
// its index, or -1 for none (the call runs normally).
func (c *Core) pickLocked(ps ...float64) int {
	u, acc := c.mu.rng.Float64(), 0.0
	for i, p := range ps {
		if acc += chance(p); u < acc {
			return i
		}
	}
	return -1
}

func (c *Core) traceLocked(format string, a ...any) {
	e := fmt.Sprintf("#%d ", c.mu.stats.Calls) + fmt.Sprintf(format, a...)
	if len(c.mu.trace) < traceLen {
		c.mu.trace = append(c.mu.trace, e)
	} else {
		c.mu.trace[c.mu.events%traceLen] = e
	}
	c.mu.events++
}
