package dissect

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"

	"golang.org/x/crypto/curve25519"
	"golang.org/x/crypto/nacl/box"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/internal/handshake"
	"github.com/raet-go/raet/keys"
	"github.com/raet-go/raet/packet"
)

// The allow handshake's raw bodies (raet-protocol.md §8.3; the layouts are
// in package internal/handshake): what the dissector can open depends on
// the keys it has.
//
//	hello     box(64 '0'; I short, R long)   I short priv + R long pub, or R long priv
//	cookie    box(R short pub, seid, deid, oreo; R long, I short)   the same pairs
//	initiate  box(I long pub, vouch, fqdn; I short, R short)   I short priv + R short pub
//	                                          (cookie or I's key log), or R's key log
//	vouch     box(I short pub; I long, R long)   a long-term private key (a keep)
//
// So the initiator's key-log line and the joined long-term public keys open
// all but the vouch, which needs either side's keep.

// allowState is what one allow transaction has shown so far.
type allowState struct {
	iShort, rShort keys.PublicKey
	haveI, haveR   bool
	rLong          *longKey
}

// openBox opens a NaCl box with priv and pub, refusing a low-order pub as
// libsodium does.
func openBox(sealed, nonce []byte, priv keys.PrivateKey, pub keys.PublicKey) ([]byte, bool) {
	if priv.IsZero() || pub.IsZero() || len(nonce) != handshake.NonceSize {
		return nil, false
	}
	if _, err := curve25519.X25519(priv[:], pub[:]); err != nil {
		return nil, false
	}
	var n [handshake.NonceSize]byte
	copy(n[:], nonce)
	p, q := [32]byte(pub), [32]byte(priv)
	return box.Open(nil, sealed, &n, &p, &q)
}

func hexs(b []byte) string { return hex.EncodeToString(b) }

func kv(k string, v any) packet.KV { return packet.KV{Key: k, Value: v} }

// allowBody shows the raw body of an allow packet, opening what the keys
// allow.
func (d *Dissector) allowBody(tx *Transaction, pk codec.PacketKind, body []byte) (packet.OrderedMap, string) {
	k := d.keys
	if k == nil {
		k = d.noKeys
	}
	var hs *allowState
	if tx != nil {
		if tx.hs == nil {
			tx.hs = &allowState{}
		}
		hs = tx.hs
	} else {
		hs = &allowState{}
	}
	switch pk {
	case codec.PacketKindHello:
		if len(body) != handshake.HelloSize {
			return nil, "hello body of the wrong size"
		}
		plain, iPub := body[:64], keys.PublicKey(body[64:96])
		sealed, nonce := body[96:176], body[176:200]
		hs.iShort, hs.haveI = iPub, true
		m := packet.OrderedMap{kv("step", "hello"), kv("short_pub", iPub.Hex())}
		opened := ""
		for _, s := range k.byPub[iPub] {
			if !s.e.OurShortPub.Equal(iPub) {
				continue
			}
			for i := range k.longPub {
				if msg, ok := openBox(sealed, nonce, s.e.OurShortPriv, k.longPub[i].pub); ok {
					hs.rLong, opened = &k.longPub[i], helloResult(msg, plain)
					break
				}
			}
		}
		if opened == "" {
			for i := range k.longPriv {
				if msg, ok := openBox(sealed, nonce, k.longPriv[i].priv, iPub); ok {
					hs.rLong, opened = &k.longPriv[i], helloResult(msg, plain)
					break
				}
			}
		}
		if opened == "" {
			opened = "not opened: no key"
		} else {
			m = append(m, kv("to", hs.rLong.who))
		}
		return append(m, kv("box", opened)), ""
	case codec.PacketKindCookie:
		if len(body) != handshake.CookieSize {
			return nil, "cookie body of the wrong size"
		}
		sealed, nonce := body[:80], body[80:104]
		m := packet.OrderedMap{kv("step", "cookie")}
		var stuff []byte
		if hs.haveI {
			for _, s := range k.byPub[hs.iShort] {
				if !s.e.OurShortPub.Equal(hs.iShort) {
					continue
				}
				for _, l := range k.longKeysFirst(hs.rLong) {
					if msg, ok := openBox(sealed, nonce, s.e.OurShortPriv, l.pub); ok {
						stuff = msg
						break
					}
				}
			}
			for i := 0; stuff == nil && i < len(k.longPriv); i++ {
				stuff, _ = openBox(sealed, nonce, k.longPriv[i].priv, hs.iShort)
			}
		}
		if len(stuff) != 64 {
			why := "not opened: no key"
			if !hs.haveI {
				why = "not opened: the hello is not in the capture"
			}
			return append(m, kv("box", why)), ""
		}
		hs.rShort, hs.haveR = keys.PublicKey(stuff[:32]), true
		return append(m, kv("box", "opened"), kv("short_pub", hexs(stuff[:32])),
			kv("seid", int64(binary.BigEndian.Uint32(stuff[32:36]))),
			kv("deid", int64(binary.BigEndian.Uint32(stuff[36:40]))), kv("oreo", hexs(stuff[40:64]))), ""
	case codec.PacketKindInitiate:
		if len(body) != handshake.InitiateSize {
			return nil, "initiate body of the wrong size"
		}
		iPub := keys.PublicKey(body[:32])
		sealed, nonce := body[56:304], body[304:328]
		m := packet.OrderedMap{kv("step", "initiate"), kv("short_pub", iPub.Hex()), kv("oreo", hexs(body[32:56]))}
		var stuff []byte
		for _, s := range k.byPub[iPub] {
			var ok bool
			if s.e.OurShortPub.Equal(iPub) { // the initiator's line
				rPub := s.e.TheirShortPub
				if hs.haveR {
					rPub = hs.rShort
				}
				stuff, ok = openBox(sealed, nonce, s.e.OurShortPriv, rPub)
			} else { // the correspondent's line
				stuff, ok = openBox(sealed, nonce, s.e.OurShortPriv, iPub)
			}
			if ok {
				break
			}
		}
		if len(stuff) != 232 {
			return append(m, kv("box", "not opened: no key-log line for this session")), ""
		}
		iLong := keys.PublicKey(stuff[:32])
		vouch, vnonce := stuff[32:80], stuff[80:104]
		fqdn := string(bytes.TrimRight(stuff[104:232], " "))
		m = append(m, kv("box", "opened"), kv("long_pub", iLong.Hex()), kv("fqdn", fqdn))
		return append(m, kv("vouch", d.openVouch(k, hs, iPub, iLong, vouch, vnonce))), ""
	}
	if len(body) == 0 {
		return packet.OrderedMap{}, ""
	}
	return packet.OrderedMap{kv("raw", hexs(body))}, ""
}

func helloResult(msg, plain []byte) string {
	if bytes.Equal(msg, plain) {
		return "opened"
	}
	return "opened, but its content differs from the plain text"
}

// longKeysFirst lists the known long-term public keys, first one first.
func (k *KeyRing) longKeysFirst(first *longKey) []longKey {
	if first == nil {
		return k.longPub
	}
	out := make([]longKey, 0, len(k.longPub)+1)
	out = append(out, *first)
	return append(out, k.longPub...)
}

// openVouch opens the vouch with a keep's long-term private key: the
// initiator's (with the correspondent's public key) or the correspondent's
// (with the initiator's).
func (d *Dissector) openVouch(k *KeyRing, hs *allowState, iShort, iLong keys.PublicKey, vouch, nonce []byte) string {
	for _, l := range k.longPriv {
		var msg []byte
		var ok bool
		if l.pub.Equal(iLong) {
			for _, r := range k.longKeysFirst(hs.rLong) {
				if !r.pub.Equal(iLong) {
					if msg, ok = openBox(vouch, nonce, l.priv, r.pub); ok {
						break
					}
				}
			}
		} else {
			msg, ok = openBox(vouch, nonce, l.priv, iLong)
		}
		if ok {
			if bytes.Equal(msg, iShort[:]) {
				return "opened: vouches for the short-term key"
			}
			return "opened, but vouches for another key"
		}
	}
	return "not opened: needs a keep's long-term private key"
}
