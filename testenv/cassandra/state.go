package cassandra

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Instance is a running Cassandra started by Start. Its fields are what Stop
// needs; it is written to and read from a state file by the command.
type Instance struct {
	PID         int           `json:"pid"`
	Dir         string        `json:"dir"`
	Host        string        `json:"host"`             // host:port of the native transport
	Listen      string        `json:"listen,omitempty"` // the node's address; "" is 127.0.0.1
	Version     string        `json:"version"`
	ReleaseInfo string        `json:"release_version"`   // system.local release_version
	StartupTime time.Duration `json:"startup_ns"`        // from exec to the first CQL answer
	CrashSafe   bool          `json:"crash_safe"`        // Options.CrashSafe at Start
	Secure      bool          `json:"secure,omitempty"`  // Options.Secure at Start
	CAFile      string        `json:"ca_file,omitempty"` // Secure: the PEM of the CA that signed the node's certificate
}

// listen returns the node's address.
func (inst *Instance) listen() string {
	if inst.Listen == "" {
		return "127.0.0.1"
	}
	return inst.Listen
}

// WriteState saves inst to path as JSON.
func WriteState(path string, inst *Instance) error {
	b, err := json.MarshalIndent(inst, "", "  ")
	if err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	return nil
}

// ReadState loads an Instance saved by WriteState.
func ReadState(path string) (*Instance, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cassandra: %w", err)
	}
	var inst Instance
	if err := json.Unmarshal(b, &inst); err != nil {
		return nil, fmt.Errorf("cassandra: state file %s: %w", path, err)
	}
	return &inst, nil
}
