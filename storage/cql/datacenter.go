package cql

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gocql/gocql"
)

// localConsistency reports whether o reads, writes or settles LWTs with a
// quorum of the coordinator's data centre alone (LOCAL_QUORUM, LOCAL_ONE,
// LOCAL_SERIAL).
func localConsistency(cons, serial gocql.Consistency) bool {
	return cons == gocql.LocalQuorum || cons == gocql.LocalOne || serial == gocql.LocalSerial
}

// hostPolicy is the host choice under health ordering (or alone, with
// DisableHealth and LocalDC): token aware, over round robin or, with
// LocalDC, over DC-aware round robin. With a LOCAL_* consistency the plans
// hold only LocalDC's hosts: a coordinator of another data centre would
// form its quorum there, one that does not overlap LocalDC's.
func hostPolicy(o *Options) gocql.HostSelectionPolicy {
	if o.LocalDC == "" {
		return gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	}
	if localConsistency(o.Consistency, o.SerialConsistency) {
		return gocql.TokenAwareHostPolicy(gocql.DCAwareRoundRobinPolicy(o.LocalDC, gocql.HostPolicyOptionDisableDCFailover))
	}
	return gocql.TokenAwareHostPolicy(gocql.DCAwareRoundRobinPolicy(o.LocalDC))
}

// checkDataCentres decides whether a session configured with localDC,
// cons and serial suits a cluster of hosts (the session's host metadata):
// LocalDC, when set, must be the data centre of one of them; without it, a
// LOCAL_* consistency is refused on a cluster of several data centres,
// whose coordinators would form quorums that do not overlap. The error
// wraps storage.ErrInvalidArgument.
func checkDataCentres(hosts []*gocql.HostInfo, localDC string, cons, serial gocql.Consistency) error {
	var dcs []string
	for _, h := range hosts {
		if dc := h.DataCenter(); dc != "" && !slices.Contains(dcs, dc) {
			dcs = append(dcs, dc)
		}
	}
	slices.Sort(dcs)
	switch {
	case localDC != "" && len(dcs) == 0:
		return invalid([]error{fmt.Errorf("LocalDC %q (cqlseq --cql-local-dc): the cluster's hosts report no data centre", localDC)})
	case localDC != "" && !slices.Contains(dcs, localDC):
		return invalid([]error{fmt.Errorf("LocalDC %q (cqlseq --cql-local-dc) is not a data centre of the cluster: its hosts are in %s", localDC, strings.Join(dcs, ", "))})
	case localDC == "" && len(dcs) > 1 && localConsistency(cons, serial):
		return invalid([]error{fmt.Errorf("the cluster has data centres %s and Consistency %v, SerialConsistency %v: a LOCAL_* consistency without LocalDC lets coordinators in different data centres form quorums that do not overlap; set LocalDC (cqlseq --cql-local-dc) to the client's data centre, or use QUORUM and SERIAL",
			strings.Join(dcs, ", "), cons, serial)})
	}
	return nil
}

// dcCheckedByOpen is a host selection policy whose local data centre
// connect checks against the session's hosts (checkDataCentres) once the
// session is up: gocql's own check (IsOperational) fails the session's
// initialisation with an error that names no data centre and wraps no
// sentinel.
type dcCheckedByOpen struct{ gocql.HostSelectionPolicy }

func (dcCheckedByOpen) IsOperational(*gocql.Session) error { return nil }
