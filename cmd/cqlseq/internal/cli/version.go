package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the release this binary was built as, set by the linker
// (make build and make release: -ldflags "-X ...cli.version=v0.1.0").
// Empty in a plain go build; versionString then reads the build info.
var version string

func newVersionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print cqlseq's version, the commit it was built from and the Go version",
		Long: `version prints one line: the release (a tag such as v0.1.0, set at
build time or by go install of a tagged version; "devel" otherwise), the
commit and whether the tree had changes ("+dirty"), and the Go version.`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			bi, _ := debug.ReadBuildInfo()
			_, err := fmt.Fprintln(e.stdout, versionString(version, bi, runtime.Version()))
			return err
		},
	}
}

// versionString is version's line: "cqlseq RELEASE (commit REV[+dirty],
// GOVERSION)". The release is the linker's value, else the main module's
// version when it is a real one (go install module@v0.1.0), else "devel".
func versionString(linked string, bi *debug.BuildInfo, goVersion string) string {
	rel := linked
	var rev string
	dirty := false
	if bi != nil {
		if rel == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			rel = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if rel == "" {
		rel = "devel"
	}
	if rev == "" {
		rev = "unknown"
	} else if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return fmt.Sprintf("cqlseq %s (commit %s, %s)", rel, rev, goVersion)
}
