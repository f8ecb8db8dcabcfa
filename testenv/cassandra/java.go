package cassandra

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// ErrMissingTool reports a program the launcher needs that is not installed.
var ErrMissingTool = errors.New("cassandra: missing tool")

// CheckTools reports every missing program (java 17+, and mvn when the jars
// are not cached yet) in one error wrapping ErrMissingTool.
func CheckTools(o Options) error {
	o.EnsureDefaults()
	var errs []error
	if _, err := exec.LookPath(o.Java); err != nil {
		errs = append(errs, fmt.Errorf("%w: java (Java 17 is needed to run Cassandra %s; install openjdk-17-jre-headless or set JAVA_HOME)", ErrMissingTool, o.Version))
	} else if major, err := javaMajor(o.Java); err != nil {
		errs = append(errs, fmt.Errorf("%w: %s -version failed: %v", ErrMissingTool, o.Java, err))
	} else if major < 17 {
		errs = append(errs, fmt.Errorf("%w: Java 17 or newer is needed, %s is Java %d", ErrMissingTool, o.Java, major))
	}
	if !fetched(libDir(o)) {
		if _, err := exec.LookPath("mvn"); err != nil {
			errs = append(errs, fmt.Errorf("%w: mvn (Maven fetches the Cassandra %s jars into %s; install maven)", ErrMissingTool, o.Version, libDir(o)))
		}
	}
	return errors.Join(errs...)
}

func javaMajor(java string) (int, error) {
	out, err := exec.Command(java, "-version").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	return parseJavaMajor(string(out))
}

// parseJavaMajor reads the major version from `java -version` output, e.g.
// `openjdk version "17.0.15" 2025-04-15` or `java version "1.8.0_402"`.
func parseJavaMajor(s string) (int, error) {
	i := strings.IndexByte(s, '"')
	if i < 0 {
		return 0, fmt.Errorf("unrecognised version output %q", s)
	}
	v := s[i+1:]
	if j := strings.IndexAny(v, ".\""); j >= 0 {
		v = v[:j]
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("unrecognised version output %q", s)
	}
	if n == 1 { // "1.8.0"
		return 8, nil
	}
	return n, nil
}
