package appparttest

import "testing"

// TestClientStartSpreads is issue 51's lockstep: with more clients than
// workspaces every client started at workspace 0 and they walked in
// lockstep, so every group hit one workspace.
func TestClientStartSpreads(t *testing.T) {
	for _, tc := range []struct{ clients, workspaces int }{{16, 200}, {64, 200}, {128, 200}, {256, 200}, {4, 4}, {7, 3}} {
		seen := map[int]int{}
		for c := range tc.clients {
			s := clientStart(c, tc.clients, tc.workspaces)
			if s < 0 || s >= tc.workspaces {
				t.Fatalf("%d clients, %d workspaces: client %d starts at %d", tc.clients, tc.workspaces, c, s)
			}
			seen[s]++
		}
		distinct := min(tc.clients, tc.workspaces)
		// At most one workspace in ten may go without a client where
		// there are at least as many clients as workspaces.
		if len(seen) < distinct*9/10 {
			t.Errorf("%d clients over %d workspaces start at %d distinct workspaces, want about %d", tc.clients, tc.workspaces, len(seen), distinct)
		}
		for w, n := range seen {
			if lim := (tc.clients + tc.workspaces - 1) / tc.workspaces; n > lim {
				t.Errorf("%d clients over %d workspaces: %d start at workspace %d, want at most %d", tc.clients, tc.workspaces, n, w, lim)
			}
		}
	}
}
