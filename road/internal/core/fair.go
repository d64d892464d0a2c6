package core

import (
	"errors"

	"github.com/raet-go/raet/packet"
)

// starveHold is how long a starved record keeps its slot: longer than its
// sender waits to send again (maxMessageRedo, backed off).
const starveHold = 3 * maxMessageRedo

// reserved reports whether the first segment of m, a new message, must
// wait: an older message of its remote was refused for room, and the last
// free slot of the remote's room is kept for it.
func (c *Core) reserved(m *messengent) bool {
	s := m.r.starved
	switch {
	case s == nil:
		return false
	case !c.now.Before(s.until):
		m.r.starved = nil
		return false
	case s.si != m.si || !newer(m.ti, s.ti):
		return false // it, an older one, or one of another session
	}
	pending, _ := c.reasm.Owner(m.r.nuid)
	return pending >= c.reasm.Config().MaxPerRemote-1
}

// starve records m, a new message whose first segment found no room in
// its remote's own quota (err), unless an older one waits already.
func (c *Core) starve(m *messengent, err error) {
	if !errors.Is(err, packet.ErrRemoteQuota) {
		return // the total is full and the remote holds the most: its own slots are not the matter
	}
	s := m.r.starved
	if s != nil && c.now.Before(s.until) && s.si == m.si && newer(m.ti, s.ti) {
		return
	}
	if s == nil {
		s = new(starved)
		m.r.starved = s
	}
	*s = starved{si: m.si, ti: m.ti, until: c.now.Add(starveHold)}
}

// fed forgets m's remote's starved record once m, its message, has room.
func (c *Core) fed(m *messengent) {
	if s := m.r.starved; s != nil && s.si == m.si && s.ti == m.ti {
		m.r.starved = nil
	}
}
