//go:build !cqlseq_invariants

package isequencer

const invariants = false
