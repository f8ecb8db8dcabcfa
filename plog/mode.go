package plog

import "fmt"

// Mode is how events and records are written: the sequences trust level
// of the reference design, or fenced.
//
//	mode     event                           records
//	trust0   InsertIfNotExists               InsertIfNotExists
//	trust1   InsertIfNotExists               Put
//	trust2   Put                             Put
//	fenced   one conditional batch per       Put, after the events
//	         chunk, on the block's fence
//
// trust0 detects any key reuse (a sequencing bug or two writers of one
// partition) at the price of a lightweight transaction per event and per
// record partition; trust2 trusts the sequencer and overwrites. fenced
// (FencedWriter, not Writer) keeps trust0's guarantee against a deposed
// owner at one lightweight transaction per chunk of a group (see
// GroupWriter). The zero Mode is ModeTrust0, the safest of the per-event
// modes.
type Mode uint8

const (
	ModeTrust0 Mode = 0
	ModeTrust1 Mode = 1
	ModeTrust2 Mode = 2
	ModeFenced Mode = 3
)

var modeNames = [...]string{ModeTrust0: "trust0", ModeTrust1: "trust1", ModeTrust2: "trust2", ModeFenced: "fenced"}

// String returns "trust0", "trust1", "trust2" or "fenced", or "Mode(n)"
// for an invalid mode.
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", m)
}

// Validate reports a Mode neither Writer nor FencedWriter implements.
func (m Mode) Validate() error {
	if int(m) < len(modeNames) {
		return nil
	}
	return fmt.Errorf("%w: unknown mode %v", ErrInvalidOptions, m)
}

// ParseMode parses "trust0", "trust1", "trust2" or "fenced".
func ParseMode(s string) (Mode, error) {
	for m, name := range modeNames {
		if s == name {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("plog: unknown mode %q (want trust0, trust1, trust2 or fenced)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (m Mode) MarshalText() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return []byte(m.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := ParseMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}
