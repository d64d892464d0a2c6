package core

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// ourCaps is what this stack advertises, from its configuration.
func (c *Core) ourCaps() *caps {
	if c.cfg.Profile == ProfileReference {
		return nil
	}
	k := &caps{
		heads:  []codec.HeadKind{codec.HeadKindRaet, codec.HeadKindJSON, codec.HeadKindBinary},
		feet:   []codec.FootKind{codec.FootKindNaCl, codec.FootKindMAC},
		bodies: []codec.BodyKind{codec.BodyKindJSON, codec.BodyKindMsgpack, codec.BodyKindCBOR},
		coats:  []codec.CoatKind{codec.CoatKindNaCl},
		mps:    c.cfg.FastMaxPacketSize,
		mids:   true,
		alive:  max(c.alivePeriod(), 0),
		bdl:    !c.cfg.NoBundling,
	}
	if c.cfg.AEAD != AEADRefuse {
		k.coats = append(k.coats, packet.AEADKinds()...)
	}
	if c.cfg.Coat != nil {
		k.coats = append(k.coats, c.cfg.Coat.Kind())
	}
	return k
}

// shareCaps returns the one copy of an advertisement equal to k that the
// remotes share (they are never changed), k itself when it is new and the
// table full. An advertisement's presence period moves with the peer's
// remotes, so peers of one version share few copies but not always one.
func (c *Core) shareCaps(k *caps) *caps {
	if k == nil {
		return nil
	}
	// The canonical form says only whether a period was advertised: the
	// period itself is part of the key.
	key := k.canonical() + "/" + strconv.FormatInt(k.alive.Milliseconds(), 10)
	if s := c.sharedCaps[key]; s != nil {
		return s
	}
	if len(c.sharedCaps) < maxSharedCaps {
		if c.sharedCaps == nil {
			c.sharedCaps = map[string]*caps{}
		}
		c.sharedCaps[key] = k
	}
	return k
}

// negotiate picks the best common profile, or nil for the reference one;
// its AEAD coat or MAC foot derive from the session key sk.
func (c *Core) negotiate(r *remote, sk *packet.SessionKey) (*profile, error) {
	ours := c.ourCaps()
	if ours == nil || r.peerCaps == nil {
		return nil, nil
	}
	p := &profile{codec: c.codec, mps: min(ours.mps, r.peerCaps.mps), mids: ours.mids && r.peerCaps.mids,
		bdl: ours.bdl && r.peerCaps.bdl}
	if ours.alive > 0 {
		p.alive = r.peerCaps.alive
	}
	if slices.Contains(r.peerCaps.heads, codec.HeadKindBinary) {
		hc, err := codec.Lookup(codec.HeadKindBinary)
		if err != nil {
			return nil, err
		}
		p.codec = hc
	}
	if mk := c.cfg.Coat; mk != nil && slices.Contains(r.peerCaps.coats, mk.Kind()) {
		coat, err := mk.Session((*[32]byte)(&r.short.Private), (*[32]byte)(&r.peerShort))
		if err != nil {
			return nil, fmt.Errorf("coat %v: %w", mk.Kind(), err)
		}
		p.coat = coat
	} else if kind, ok := packet.ChooseAEAD(ours.coats, r.peerCaps.coats); ok {
		// Both ends choose the same: the plugin's kind only when both
		// offer it, else ChooseAEAD, which is symmetric.
		a, err := sk.AEADCoat(kind)
		if err != nil {
			return nil, fmt.Errorf("coat %v: %w", kind, err)
		}
		p.aead = a
		return p, nil // no foot: the AEAD's tag authenticates the packet
	}
	if slices.Contains(r.peerCaps.feet, codec.FootKindMAC) {
		mac, err := sk.MACFoot()
		if err != nil {
			return nil, fmt.Errorf("mac foot: %w", err)
		}
		p.mac = mac
	}
	return p, nil
}
