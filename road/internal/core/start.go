package core

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/keys"
	"github.com/raet-go/raet/packet"
)

// New makes a core from cfg (see Config.Populate) and st: it restores or
// makes the local estate and restores the kept remotes. now is the time.
func New(cfg *Config, st Store, now time.Time) (*Core, error) {
	if err := cfg.Populate(); err != nil {
		return nil, err
	}
	hc, err := codec.Lookup(cfg.HeadKind)
	if err != nil {
		return nil, err
	}
	ser, err := packet.Builtin(cfg.BodyKind)
	if err != nil {
		return nil, err
	}
	c := &Core{
		cfg: cfg, log: cfg.Logger, now: now, store: st,
		codec: hc, bodies: ser,
		roster: newRoster(),
		kept:   keeper{roles: map[string]*keptRole{}}, spares: newSpares(),
		reasm: packet.NewReassembler[uint32, msgKey](&cfg.Reassembly),
		stats: newStats(), readers: readerKeys{all: true}, rekeyAt: defaultRekeyAt,
		replayHold: replayHold(max(cfg.MessageTimeout, cfg.AllowTimeout, cfg.AliveTimeout)),
	}
	if cfg.MessageTimeout < 0 {
		c.replayHold = replayHold(-1) // messages are retried for ever
	}
	if err := c.loadLocal(); err != nil {
		return nil, err
	}
	c.signer = packet.NewNaClFoot((*[32]byte)(&c.local.signing.Seed), nil)
	c.loadRoles()
	c.loadRemotes()
	return c, nil
}

// loadLocal restores the local estate from the store or makes a new one.
func (c *Core) loadLocal() error {
	est, role, ok, err := c.store.loadLocal()
	if err != nil {
		return fmt.Errorf("raet: load local estate: %w", err)
	}
	c.local.main = c.cfg.Main
	if ok {
		if c.cfg.Name != "" && c.cfg.Name != est.Name {
			return fmt.Errorf("raet: the keep belongs to estate %q, not %q", est.Name, c.cfg.Name)
		}
		c.local.name, c.local.role, c.local.uid, c.local.puid, c.local.sid, c.local.fqdn = est.Name, est.Role, est.UID, est.PUID, est.SID, est.FQDN
		c.local.keptAHA = est.AHA
		c.local.signing = keys.NewSigning(role.Seed)
		if c.local.box, err = keys.NewBox(role.Private); err != nil {
			return err
		}
	} else {
		c.local.name = c.cfg.Name
		if c.local.name == "" {
			c.local.name = "estate_" + randomHex(16)
		}
		c.local.role = c.cfg.Role
		if c.local.role == "" {
			c.local.role = c.local.name
		}
		c.local.signing = keys.GenerateSigning()
		if c.local.box, err = keys.GenerateBox(); err != nil {
			return err
		}
		c.local.uid = c.nextUid()
	}
	return nil
}

// loadRemotes restores the kept remotes, with their roles' keys (loadRoles
// first): joined as they were, not allowed, with a new session (§9.3).
func (c *Core) loadRemotes() {
	kept, err := c.store.loadRemotes()
	if err != nil {
		c.log.Warn("raet: some kept remotes were not loaded", "err", err)
	}
	for _, est := range kept {
		if r := c.restore(est); r != nil {
			c.addRemote(r)
			// The uids given since the local estate was last written (only
			// at start) are the kept remotes': the next is beyond them.
			if r.nuid > c.local.puid {
				c.local.puid = r.nuid
			}
		}
	}
}

// restore makes a remote from its kept files: joined as it was, not
// allowed, with a new session (§9.3); nil when they are unusable or clash
// with a remote we hold.
func (c *Core) restore(est keep.RemoteEstate) *remote {
	ha, perr := parseHostPort(est.HA)
	if perr != nil {
		c.log.Warn("raet: kept remote has a bad address", "remote", est.Name, "err", perr)
		return nil
	}
	kr, err := c.keptRoleOf(est.Role)
	if kr == nil {
		c.log.Warn("raet: kept remote has no role keys; skipped", "remote", est.Name, "role", est.Role, "err", err)
		return nil
	}
	r := &remote{nuid: est.UID, fuid: est.FUID, name: est.Name, role: est.Role, ha: ha,
		main: est.Main, kind: est.Kind, fqdn: est.FQDN, verify: kr.rec.Verify, pub: kr.rec.Public,
		sid: est.SID, keptSid: est.SID, joined: est.Joined != nil && *est.Joined}
	if !r.joined || kr.rec.Acceptance != keep.Accepted {
		// Only keys an operator (or the policy) accepted make a joined
		// remote: a kept "joined" of keys not accepted is not trusted.
		r.joined = false
	}
	if c.roster.remotes[r.nuid] != nil || c.roster.byName[r.name] != nil || r.nuid == c.local.uid {
		c.log.Warn("raet: kept remote clashes with another; skipped", "remote", r.name, "uid", r.nuid)
		return nil
	}
	r.nextSid()
	return r
}

// Start records the listening address and persists the local estate and
// remotes, as the reference does at stack start, and starts the presence
// timers.
func (c *Core) Start(addr netip.AddrPort, now time.Time) {
	c.now = now
	c.local.aha = keep.HostPort{Host: addr.Addr().String(), Port: addr.Port()}
	c.saveLocal()
	rs := make([]*remote, 0, len(c.roster.remotes))
	for _, r := range c.roster.remotes {
		c.saveRemote(r, false)
		rs = append(rs, r)
	}
	c.startPresence(rs)
}
