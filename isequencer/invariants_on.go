//go:build cqlseq_invariants

package isequencer

// invariants enables internal consistency checks that panic on a violated
// invariant. Built with -tags cqlseq_invariants (make test does).
const invariants = true
