package main

import (
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// crashChildEnv, when set, makes the test binary run cqlseq with its
// words as arguments instead of the tests: crash_test.go's child process.
const crashChildEnv = "CQLSEQ_TEST_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(crashChildEnv); args != "" {
		os.Args = append([]string{"cqlseq"}, strings.Fields(args)...)
		main()
	}
	goleak.VerifyTestMain(m)
}
