package dissect

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/internal/handshake"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/keys"
	"github.com/raet-go/raet/packet"
)

// KeyRing holds the keys a Dissector uses:
//
//   - from keeps (AddKeep): the Ed25519 verify keys that check feet, and
//     the long-term Curve25519 keys that open the allow handshake's boxes;
//   - from key logs (AddKeyLog, the road stack's RAET_SESSION lines): the
//     short-term keys of sessions, which open message, alive and other
//     coats in both directions, and the handshake's boxes where one side's
//     short-term private key suffices.
//
// A keep is read, never written (keep.OpenReadOnly). A KeyRing is not safe for
// concurrent use while keys are added; once built it is only read.
type KeyRing struct {
	keeps []*keepKeys
	// verifiers by (se, de) of the packets they verify, and by de alone.
	byPair map[[2]uint32][]verifier
	byDe   map[uint32][]verifier
	// long-term Curve25519 keys: the keeps' own (with the private key) and
	// the public keys of remote roles.
	longPriv []longKey
	longPub  []longKey
	sessions []*session
	byPub    map[keys.PublicKey][]*session // by either short public key
	hasKeep  bool
}

type keepKeys struct {
	dir   string
	name  string
	local keep.LocalRole
	hasLR bool
}

type verifier struct {
	foot *packet.NaClFoot
	who  string // the estate whose key it is
}

type longKey struct {
	who  string
	priv keys.PrivateKey // zero for a public key only
	pub  keys.PublicKey
}

// session is one key-log entry: one side's short-term pair and the other
// side's short-term public key.
type session struct {
	e    handshake.KeyLogEntry
	coat *packet.NaClCoat
	mac  *packet.MACFoot
	// aead holds the AEAD coats that open the session's packets, made
	// when first needed: by coat kind (AES-256-GCM, ChaCha20-Poly1305)
	// and by sender (0: the entry's own side, 1: the other side).
	aead [2][2]*packet.AEADCoat
}

// aeadIndex is the index of an AEAD coat kind in session.aead.
func aeadIndex(k codec.CoatKind) int {
	if k == codec.CoatKindChaCha20Poly1305 {
		return 1
	}
	return 0
}

// aeadOpener returns the coat that opens the packets of kind k sent by the
// entry's own side (fromUs) or by the other side, nil if the keys are
// unusable. An AEAD coat made from our private key and their public key
// opens what they sent; the same shared key with the public keys swapped
// opens what we sent, since each direction's key is derived from the
// shared key and the sender's and receiver's public keys (docs/aead.md).
func (s *session) aeadOpener(k codec.CoatKind, fromUs bool) *packet.AEADCoat {
	dir := 1
	if fromUs {
		dir = 0
	}
	if c := s.aead[aeadIndex(k)][dir]; c != nil {
		return c
	}
	priv, ours, theirs := [32]byte(s.e.OurShortPriv), [32]byte(s.e.OurShortPub), [32]byte(s.e.TheirShortPub)
	var c *packet.AEADCoat
	if fromUs {
		shared, err := s.e.OurShortPriv.SharedKey(s.e.TheirShortPub)
		if err != nil {
			return nil
		}
		c, _ = packet.SessionKeyOf(&shared, &theirs, &ours).AEADCoat(k)
	} else {
		c, _ = packet.NewAEADCoat(k, &priv, &theirs)
	}
	s.aead[aeadIndex(k)][dir] = c
	return c
}

// NewKeyRing returns an empty key ring.
func NewKeyRing() *KeyRing {
	return &KeyRing{byPair: map[[2]uint32][]verifier{}, byDe: map[uint32][]verifier{},
		byPub: map[keys.PublicKey][]*session{}}
}

// HasVerifyKeys reports whether a keep was added: without one, feet are not
// checked and Packet.Verified stays nil.
func (k *KeyRing) HasVerifyKeys() bool { return k != nil && k.hasKeep }

// Sessions returns the number of key-log sessions.
func (k *KeyRing) Sessions() int { return len(k.sessions) }

// AddKeep reads the keep in dir (the reference's layout, see package
// keep), with keep.OpenReadOnly: nothing is created or moved. The keep's own
// estate verifies the packets it sent; its remotes' roles verify the packets
// they sent it. Files that are missing are skipped; files that are corrupt
// are reported in the returned error, and the keys of the other files are
// still added.
func (k *KeyRing) AddKeep(dir string) error {
	kp, err := keep.OpenReadOnly(dir)
	if err != nil {
		return fmt.Errorf("raet: %w", err)
	}
	var errs []error
	found := func(err error) bool {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		return err == nil
	}
	kk := &keepKeys{dir: dir}
	if le, err := kp.LoadLocal(); found(err) {
		kk.name = le.Name
	}
	if lr, err := kp.LoadLocalRole(); found(err) {
		kk.local, kk.hasLR = lr, true
	}
	if kk.name == "" {
		kk.name = kk.local.Role
	}
	if kk.name == "" {
		kk.name = filepath.Base(dir)
	}
	roles := map[string]keep.RemoteRole{}
	rs, err := kp.LoadRemoteRoles()
	found(err)
	for _, r := range rs {
		roles[r.Role] = r
		k.addLongPub(r.Role, r.Public)
	}
	remotes, err := kp.LoadRemotes()
	found(err)
	if kk.hasLR {
		if pub, err := kk.local.Private.PublicKey(); err == nil {
			k.longPriv = append(k.longPriv, longKey{who: kk.name, priv: kk.local.Private, pub: pub})
			k.addLongPub(kk.name, pub)
		}
	}
	for _, r := range remotes {
		role, ok := roles[r.Role]
		if ok && !role.Verify.IsZero() {
			// r sent to us: se = its uid for us (our fuid), de = our uid for it.
			v := newVerifier(role.Verify, r.Name)
			k.byPair[[2]uint32{r.FUID, r.UID}] = append(k.byPair[[2]uint32{r.FUID, r.UID}], v)
			k.byDe[r.UID] = append(k.byDe[r.UID], v)
		}
		if kk.hasLR {
			// we sent to r: se = our uid for r, de = r's uid for us.
			v := newVerifier(kk.local.Seed.VerifyKey(), kk.name)
			k.byPair[[2]uint32{r.UID, r.FUID}] = append(k.byPair[[2]uint32{r.UID, r.FUID}], v)
			k.byDe[r.FUID] = append(k.byDe[r.FUID], v)
		}
	}
	k.keeps = append(k.keeps, kk)
	k.hasKeep = true
	return errors.Join(errs...)
}

func newVerifier(vk keys.VerifyKey, who string) verifier {
	key := [32]byte(vk)
	return verifier{foot: packet.NewNaClFoot(nil, func(uint32) (*[32]byte, bool) { return &key, true }), who: who}
}

func (k *KeyRing) addLongPub(who string, pub keys.PublicKey) {
	if pub.IsZero() {
		return
	}
	for _, l := range k.longPub {
		if l.pub.Equal(pub) {
			return
		}
	}
	if len(k.longPub) < maxLearnedKeys {
		k.longPub = append(k.longPub, longKey{who: who, pub: pub})
	}
}

// maxLearnedKeys bounds the long-term public keys kept, from keeps and from
// join bodies in the capture.
const maxLearnedKeys = 1024

// learnLongPub records a long-term public key seen in a join body; it is
// used only to try to open allow boxes.
func (k *KeyRing) learnLongPub(who string, hex string) {
	pub, err := keys.ParsePublicKey(hex)
	if err == nil {
		k.addLongPub(who, pub)
	}
}

// AddKeyLog reads key-log lines ("RAET_SESSION <our short pub> <our short
// priv> <their short pub>") from r. On a bad line it returns the error and
// keeps the entries before it.
func (k *KeyRing) AddKeyLog(r io.Reader) error {
	entries, err := handshake.ParseKeyLog(r)
	for _, e := range entries {
		k.addSession(e)
	}
	return err
}

// AddKeyLogFile is AddKeyLog of the file at path; its errors name the file.
func (k *KeyRing) AddKeyLogFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := k.AddKeyLog(f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func (k *KeyRing) addSession(e handshake.KeyLogEntry) {
	for _, s := range k.byPub[e.OurShortPub] {
		if s.e.OurShortPub.Equal(e.OurShortPub) && s.e.TheirShortPub.Equal(e.TheirShortPub) {
			return // the same line twice
		}
	}
	priv, pub := [32]byte(e.OurShortPriv), [32]byte(e.TheirShortPub)
	s := &session{e: e}
	s.coat, _ = packet.NewNaClCoat(&priv, &pub, nil)
	s.mac, _ = packet.NewMACFoot(&priv, &pub)
	k.sessions = append(k.sessions, s)
	k.byPub[e.OurShortPub] = append(k.byPub[e.OurShortPub], s)
	k.byPub[e.TheirShortPub] = append(k.byPub[e.TheirShortPub], s)
}

// verifyResult is the outcome of checking a foot.
type verifyResult struct {
	verified *bool
	who      string
	note     string
}

var (
	trueVal  = true
	falseVal = false
)

// verifyNaCl checks an Ed25519 foot with the keys for the packet's se and
// de, the key that verified the flow's last packet first.
func (k *KeyRing) verifyNaCl(c *sessionCache, f flowKey, p *packet.Packet) verifyResult {
	h := &p.Head
	cands := k.byPair[[2]uint32{h.SourceID, h.DestinationID}]
	if len(cands) == 0 {
		cands = k.byDe[h.DestinationID]
	}
	if len(cands) == 0 {
		return verifyResult{note: fmt.Sprintf("no verify key for se %d de %d in the keeps", h.SourceID, h.DestinationID)}
	}
	vk := verKey{f, h.SourceID, h.DestinationID}
	if i, ok := c.ver[vk]; ok && i < len(cands) {
		if p.Verify(cands[i].foot) == nil {
			return verifyResult{verified: &trueVal, who: cands[i].who}
		}
	}
	for i, v := range cands {
		if p.Verify(v.foot) == nil {
			if c.ver == nil || len(c.ver) >= maxFlows {
				c.ver = map[verKey]int{}
			}
			c.ver[vk] = i
			return verifyResult{verified: &trueVal, who: v.who}
		}
	}
	who := cands[0].who
	for _, v := range cands[1:] {
		who += "|" + v.who
	}
	return verifyResult{verified: &falseVal, who: who, note: "signature does not verify with the key of " + who}
}

// aeadKey names one direction of a flow: its packets from src.
type aeadKey struct {
	f   flowKey
	src netip.AddrPort
}

// aeadHit is the key-log session, and its side, whose coat opened a
// direction of a flow.
type aeadHit struct {
	s      *session
	fromUs bool
}

// openAEAD opens the AEAD coat of p, sent from src in flow, with the
// key-log sessions: the session and side that opened the direction before
// first, then each session's coats for either side. known reports that a
// session had opened the direction before (so a failure is an error, not a
// missing key); err is the last open's error.
func (k *KeyRing) openAEAD(c *sessionCache, f flowKey, src netip.AddrPort, p *packet.Packet) (plain []byte, s *session, known bool, err error) {
	ck := p.Head.CoatKind
	key := aeadKey{f, src}
	if hit, ok := c.aead[key]; ok {
		if a := hit.s.aeadOpener(ck, hit.fromUs); a != nil {
			if plain, err = p.OpenAEAD(nil, a); err == nil {
				return plain, hit.s, true, nil
			}
			if !errors.Is(err, packet.ErrCoatOpen) {
				return nil, nil, true, err // a replay, or a counter behind the window
			}
		}
		known = true
	}
	if c.aeadMiss[key] >= maxMisses {
		return nil, nil, known, err
	}
	for _, s := range k.sessions {
		for _, fromUs := range [2]bool{false, true} {
			a := s.aeadOpener(ck, fromUs)
			if a == nil {
				continue
			}
			if plain, err = p.OpenAEAD(nil, a); err == nil {
				if c.aead == nil || len(c.aead) >= maxFlows {
					c.aead = map[aeadKey]aeadHit{}
				}
				c.aead[key] = aeadHit{s, fromUs}
				delete(c.aeadMiss, key)
				return plain, s, known, nil
			}
		}
	}
	if c.aeadMiss == nil || len(c.aeadMiss) >= maxFlows {
		c.aeadMiss = map[aeadKey]int{}
	}
	c.aeadMiss[key]++
	return nil, nil, known, err
}

// flowKey names a session on the wire: its two addresses, in order, and its
// session id.
type flowKey struct {
	a, b netip.AddrPort
	si   uint32
}

func makeFlowKey(x, y netip.AddrPort, si uint32) flowKey {
	if y.Addr().Less(x.Addr()) || (y.Addr() == x.Addr() && y.Port() < x.Port()) {
		x, y = y, x
	}
	return flowKey{x, y, si}
}

// maxFlows bounds the session cache.
const maxFlows = 4096

// sessionCache remembers which key-log session opened the coats of a flow,
// and which verify key checked its feet.
type sessionCache struct {
	hit      map[flowKey]*session
	miss     map[flowKey]int
	ver      map[verKey]int
	aead     map[aeadKey]aeadHit
	aeadMiss map[aeadKey]int
}

type verKey struct {
	f      flowKey
	se, de uint32
}

func (c *sessionCache) get(f flowKey) (*session, int) { return c.hit[f], c.miss[f] }

func (c *sessionCache) put(f flowKey, s *session) {
	if c.hit == nil || len(c.hit) >= maxFlows {
		c.hit = map[flowKey]*session{}
	}
	c.hit[f] = s
	delete(c.miss, f)
}

func (c *sessionCache) fail(f flowKey) {
	if c.miss == nil || len(c.miss) >= maxFlows {
		c.miss = map[flowKey]int{}
	}
	c.miss[f]++
}

// maxMisses is how many coats of a flow may fail to open with every session
// before the flow is no longer tried.
const maxMisses = 3

// openCoat opens a nacl coat of the flow with the key-log sessions: the
// session that opened the flow before first, then every session.
func (k *KeyRing) openCoat(c *sessionCache, f flowKey, coat []byte) ([]byte, *session, bool) {
	s, misses := c.get(f)
	if s != nil && s.coat != nil {
		if plain, err := s.coat.Open(nil, coat); err == nil {
			return plain, s, true
		}
	}
	if misses >= maxMisses {
		return nil, nil, false
	}
	for _, s := range k.sessions {
		if s.coat == nil {
			continue
		}
		if plain, err := s.coat.Open(nil, coat); err == nil {
			c.put(f, s)
			return plain, s, true
		}
	}
	c.fail(f)
	return nil, nil, false
}

// verifyMAC checks a MAC foot with the key-log sessions; the foot of either
// direction verifies with either side's entry.
func (k *KeyRing) verifyMAC(c *sessionCache, f flowKey, p *packet.Packet) verifyResult {
	try := func(s *session) bool {
		if s.mac == nil {
			return false
		}
		n := len(p.Raw) - len(p.Foot)
		if s.mac.Verify(p.Raw[:n], p.Foot, p.Head.DestinationID) == nil {
			return true
		}
		tag, err := s.mac.Sign(append([]byte(nil), p.Raw[:n]...))
		return err == nil && len(tag) == len(p.Raw) && string(tag[n:]) == string(p.Foot)
	}
	if s, _ := c.get(f); s != nil && try(s) {
		return verifyResult{verified: &trueVal, who: "session " + s.e.OurShortPub.Hex()[:8]}
	}
	for _, s := range k.sessions {
		if try(s) {
			c.put(f, s)
			return verifyResult{verified: &trueVal, who: "session " + s.e.OurShortPub.Hex()[:8]}
		}
	}
	if len(k.sessions) == 0 {
		return verifyResult{note: "MAC foot: no key log"}
	}
	return verifyResult{verified: &falseVal, note: "MAC foot does not verify with any key-log session"}
}

// footVerify checks the packet's foot. Without keeps, Ed25519 feet are not
// checked (nil result).
func (k *KeyRing) footVerify(c *sessionCache, f flowKey, p *packet.Packet) verifyResult {
	switch p.Head.FootKind {
	case codec.FootKindNada:
		if packet.IsAEAD(p.Head.CoatKind) {
			return verifyResult{note: "no foot: its " + p.Head.CoatKind.String() + " coat authenticates it (checked when the key log opens it)"}
		}
		return verifyResult{note: "unsigned"}
	case codec.FootKindNaCl:
		if !k.HasVerifyKeys() {
			return verifyResult{note: "no keep given"}
		}
		return k.verifyNaCl(c, f, p)
	case codec.FootKindMAC:
		if k == nil {
			return verifyResult{note: "no key log given"}
		}
		return k.verifyMAC(c, f, p)
	}
	return verifyResult{note: "foot kind " + p.Head.FootKind.String() + " cannot be checked"}
}
