package core

import (
	"net/netip"

	"github.com/raet-go/raet/road/internal/shrink"
)

// roster is the remotes the core holds: by uid and by name, the vacuous
// joins in progress by address, and the order of their silence.
type roster struct {
	remotes map[uint32]*remote
	byName  map[string]*remote
	joinees map[netip.AddrPort]*remote // vacuous joins in progress, by address
	silence silenceList                // the remotes, the longest silent first (forget.go)
	peak    shrink.Peak                // the most remotes held since the maps were last rebuilt (Core.shrink)
}

func newRoster() roster {
	return roster{remotes: map[uint32]*remote{}, byName: map[string]*remote{}, joinees: map[netip.AddrPort]*remote{}}
}

// tracked says whether r is the core's: added, or a vacuous join in
// progress (joinees).
func (rs *roster) tracked(r *remote) bool { return r.added || rs.joinees[r.ha] == r }

// silenceList holds the added remotes in the order they were last heard,
// the longest silent at head (through remote.heardLinks): hearing a
// remote (it goes last) and finding the longest silent cost O(1),
// whatever the number of remotes.
type silenceList = orderList[*remote]
