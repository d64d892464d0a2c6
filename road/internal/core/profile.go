package core

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// Capability negotiation (raet-go only; the reference ignores all of it).
//
// An estate advertises what it can do under an extra key "caps" of its join
// request or response body: {"v":1,"hk":[…],"fk":[…],"bk":[…],"mps":N,"mid":1}
// ("mid": it puts and reads message ids, see mid.go), and "ap":N when it
// takes part in driven presence, N its presence period in ms (presence.go;
// only that it advertises one is in the digest below: the period changes
// with the remotes, and the answering end tells it again in its alive
// acks, which are authenticated); "bdl": it bundles small messages and
// coalesces their answers (bundle.go).
// The reference answers a join whose body has extra keys normally and sends
// none, so it always gets the reference profile.
//
// The advertisements travel in join bodies, which are not signed, so the
// allow handshake authenticates them: an allower that advertises puts
//
//	hex(SHA-256(its caps || the caps it received))
//
// as the plain text of its hello (64 characters, where the reference puts
// 64 '0'; the reference, like OpenHello, requires only that the hello's box
// opens to the plain it carries), which the hello's signature
// authenticates, and its initiate's fqdn field holds what the reference
// expects there, the allowent's host name. To an allowent whose
// advertisement it has (a raet-go estate: an earlier release reads the
// digest only there) the fqdn field holds "raet-caps:" and the same hex
// too. An allowent that advertises computes the same digest from what it
// received and sent; any difference — a changed, added or stripped
// advertisement, or an allower that received ours but sends no digest —
// fails the allow with reject, so neither end can be downgraded without
// failing loudly. Advertisements are not kept on disk: after a
// restart an estate joins again before it allows (and an allowent that
// lost them answers unjoined, which has the same effect).
//
// Once allowed, two estates that both advertised use the best common
// profile for every packet but joins and allows: binary heads when both
// have them, the MAC foot instead of Ed25519 when both have it, a coat
// plugin both offer (Config.Coat) instead of NaCl, else an AEAD coat both
// offer (packet.ChooseAEAD; it replaces coat and foot, see aead.go), and
// the smaller of their largest packet sizes.

// caps is what an estate advertises.
type caps struct {
	heads  []codec.HeadKind
	feet   []codec.FootKind
	bodies []codec.BodyKind
	coats  []codec.CoatKind
	mps    int  // largest datagram it takes
	mids   bool // message ids (mid.go)
	// alive is its presence period (caps "ap", presence.go); zero: it
	// does not take part in driven presence.
	alive time.Duration
	bdl   bool // bundles and answers (bundle.go)
}

const capsPrefix = "raet-caps:"

// body is the advertisement as a join body value.
func (k *caps) body() packet.OrderedMap {
	ints := func(n int, at func(int) int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = at(i)
		}
		return out
	}
	b := packet.OrderedMap{
		{Key: "v", Value: 1},
		{Key: "hk", Value: ints(len(k.heads), func(i int) int { return int(k.heads[i]) })},
		{Key: "fk", Value: ints(len(k.feet), func(i int) int { return int(k.feet[i]) })},
		{Key: "bk", Value: ints(len(k.bodies), func(i int) int { return int(k.bodies[i]) })},
		{Key: "ck", Value: ints(len(k.coats), func(i int) int { return int(k.coats[i]) })},
		{Key: "mps", Value: k.mps},
	}
	if k.mids {
		b = append(b, packet.KV{Key: "mid", Value: 1})
	}
	if k.alive > 0 {
		b = append(b, packet.KV{Key: "ap", Value: k.alive.Milliseconds()})
	}
	if k.bdl {
		b = append(b, packet.KV{Key: "bdl", Value: 1})
	}
	return b
}

// canonical is the advertisement's digest input; nil is the empty string.
func (k *caps) canonical() string {
	if k == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("v1")
	write := func(name string, vs []int) {
		b.WriteString(";" + name + "=")
		for i, v := range vs {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(v))
		}
	}
	hk := make([]int, len(k.heads))
	for i, v := range k.heads {
		hk[i] = int(v)
	}
	fk := make([]int, len(k.feet))
	for i, v := range k.feet {
		fk[i] = int(v)
	}
	bk := make([]int, len(k.bodies))
	for i, v := range k.bodies {
		bk[i] = int(v)
	}
	ck := make([]int, len(k.coats))
	for i, v := range k.coats {
		ck[i] = int(v)
	}
	write("hk", hk)
	write("fk", fk)
	write("bk", bk)
	write("ck", ck)
	write("mps", []int{k.mps})
	if k.mids {
		write("mid", []int{1})
	}
	if k.alive > 0 {
		write("ap", []int{1})
	}
	if k.bdl {
		write("bdl", []int{1})
	}
	return b.String()
}

// capsDigest is what the allower sends in the fqdn field to a raet-go
// allowent whose advertisement it has (one of an earlier release reads it
// only there).
func capsDigest(allower, allowent *caps) string {
	return capsPrefix + capsSum(allower, allowent)
}

// capsSum is the hex of the SHA-256 of both advertisements: the plain text
// of the allower's hello (64 characters, as the reference's 64 '0').
func capsSum(allower, allowent *caps) string {
	sum := sha256.Sum256([]byte(allower.canonical() + "\x00" + allowent.canonical()))
	return hex.EncodeToString(sum[:])
}

// parseCaps reads the "caps" value of a join body; nil when absent or not
// understood (then the peer gets the reference profile).
func parseCaps(v any) *caps {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	if ver, _ := intValue(m["v"]); ver != 1 {
		return nil
	}
	list := func(key string) ([]int, bool) {
		raw, ok := m[key].([]any)
		if !ok || len(raw) > 16 {
			return nil, false
		}
		out := make([]int, 0, len(raw))
		for _, x := range raw {
			n, ok := intValue(x)
			if !ok || n < 0 || n > 255 {
				return nil, false
			}
			out = append(out, int(n))
		}
		return out, true
	}
	hk, ok1 := list("hk")
	fk, ok2 := list("fk")
	bk, ok3 := list("bk")
	ck, ok5 := list("ck")
	mps, ok4 := intValue(m["mps"])
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || mps < 256 || mps > 65507 {
		return nil
	}
	mid, _ := intValue(m["mid"])
	bdl, _ := intValue(m["bdl"])
	k := &caps{mps: int(mps), mids: mid == 1, alive: parseAlivePeriod(m["ap"]), bdl: bdl == 1}
	for _, v := range hk {
		k.heads = append(k.heads, codec.HeadKind(v))
	}
	for _, v := range fk {
		k.feet = append(k.feet, codec.FootKind(v))
	}
	for _, v := range bk {
		k.bodies = append(k.bodies, codec.BodyKind(v))
	}
	for _, v := range ck {
		k.coats = append(k.coats, codec.CoatKind(v))
	}
	return k
}

// parseAlivePeriod reads a presence period in ms ("ap"); zero when absent
// or out of range.
func parseAlivePeriod(v any) time.Duration {
	ms, ok := intValue(v)
	if !ok || ms <= 0 || ms > maxAlivePeriod.Milliseconds() {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// maxSharedCaps bounds the advertisements shareCaps keeps: estates of a
// few versions advertise a few, and strangers cannot grow the table.
const maxSharedCaps = 16

// profile is how packets to one remote are made after its allow.
type profile struct {
	codec codec.Codec
	mac   *packet.MACFoot  // nil: Ed25519
	coat  packet.Coat      // a negotiated coat (Config.Coat); nil: NaCl
	aead  *packet.AEADCoat // the AEAD coat (aead.go); nil: coat and foot as above
	mps   int
	// alive is the remote's presence period when both ends advertised one
	// (driven presence, presence.go): from its caps, then from its alive
	// acks; zero: the reference's presence.
	alive time.Duration
	// aeadCheck is when aead is next asked to drop its cipher states if
	// idle (unix ns, idleAEAD); zero: not watched, the states are dropped.
	aeadCheck int64
	// aeadHold is how long the states are kept idle (usedAEAD; zero:
	// aeadIdle), and aeadDropped when idleAEAD last dropped them (unix ns;
	// zero: built since, or never dropped by it).
	aeadHold    time.Duration
	aeadDropped int64
	mids        bool // messages carry ids (mid.go)
	bdl         bool // small messages go in bundles, answers coalesced (bundle.go)
}

// Profile selects what an estate offers its peers.
type Profile uint8

// The profiles.
const (
	// ProfileAuto advertises the fast profile and uses it with peers that
	// advertise it too (raet-go estates); others get the reference profile.
	ProfileAuto Profile = iota
	// ProfileReference advertises nothing: every peer gets the reference
	// profile (native heads, Ed25519 on every packet, 1024-byte packets).
	ProfileReference
)

// AEADMode says whether the fast profile offers the AEAD coats.
type AEADMode uint8

// The AEAD modes.
const (
	// AEADPrefer offers packet.AEADKinds() and seals a session with one
	// when the peer offers one too (and no coat plugin was agreed on).
	AEADPrefer AEADMode = iota
	// AEADRefuse offers none: fast-profile sessions keep the NaCl coat
	// and the MAC foot.
	AEADRefuse
)

func intValue(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case uint64:
		if x <= 1<<62 {
			return int64(x), true
		}
	case int:
		return int64(x), true
	}
	return 0, false
}

// maxAlivePeriod bounds the period an estate uses or takes from a peer.
const maxAlivePeriod = time.Hour
