package dissect_test

import (
	"bytes"
	"encoding/hex"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/keys"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Vectors of raet-protocol.md: §4.1 (a)–(c), §5 (e) and §7.4, as bytes from
// the reference's unit tests and captures.
var (
	// (a) raw body, no coat or foot.
	vectorRaw = []byte("ri RAET\npl 0040\nhl 22\nfg 00\nbk 2\n\nThis is a fine kettle of fish.")
	// (b) join ack of a vacuous join, joiner side, 55 bytes.
	vectorJoinAck = `
72 69 20 52 41 45 54 0a 70 6c 20 30 30 33 37 0a   ri RAET.pl 0037.
68 6c 20 33 37 0a 66 67 20 30 30 0a 70 6b 20 31   hl 37.fg 00.pk 1
0a 73 65 20 63 61 0a 74 69 20 31 0a 74 6b 20 31   .se ca.ti 1.tk 1
0a 62 6b 20 31 0a 0a                              .bk 1..`
	// (c) alive request, other -> main, signed by other.
	vectorAlive = "726920524145540a706c20303039320a686c2035320a66672030300a706b20340a73652063610a64652036360a736920320a746920330a746b20340a626b20310a636b20310a666b20310a666c2034300a0ae9243edbf4302dc4d453f40cfd1afe1facf95d1c62ebff3e88fd3526ad263e612dae7a061fe009acfd55e4fd4e32340c9b8fec9f0aec9c3b9033107cb1a4b303"
	// (e) JSON head, JSON body.
	vectorJSON = []byte("{\"ri\":\"RAET\",\"pl\":\"0000076\",\"hl\":\"42\",\"fg\":\"00\",\"hk\":1,\"bk\":1}\r\n\r\n{\"msg\":\"Hello Raet World\",\"extra\":\"Goodby Big Moon\"}")
	// §7.4: a message other -> main, signed and coated.
	vectorMessage = "726920524145540a706c20303064640a686c2034380a66672030340a73652063610a64652036360a736920320a746920340a626b20310a636b20310a666b20310a666c2034300a0a7a0455658ca9ff02ad2de08d5d5c13b737a6e3dc6002b6c9ea96b818fbdaf302b3ea2720007d184b14da66f34c4a0949e3541f2075fa2499b12a3d8700d143974c0949c4289c3f5df2050209da443e71846a5a0da528967fdba57d025add56745920be25e0045fcfdf40e4643074b6218b9381d3158bf77bccabf5cfe9d8adc76585c857c8845d8762bf68c050077d3e16574de20e"
	// The session keys of that message, as other's key-log line.
	vectorKeyLog = "RAET_SESSION ea798c24f06f4436d8adc1327ff28506fcfa4cfde84c7b37ff677d30935c9163 211f3b713dfa4e8c79327b7a17a775eec955823d76af31047a5e0930eb0574f0 799a4818ec3d54dae1fb3122cf2cd18c4a7aeb5f25a17fe33576730cbaf6be7a\n"
)

func TestLayerVectors(t *testing.T) {
	cases := []struct {
		name    string
		data    []byte
		want    func(h *codec.Head) bool
		hl, cl  int
		payload string
	}{
		{"raw body", vectorRaw, func(h *codec.Head) bool {
			return h.PacketLength == 64 && h.HeadLength == 34 && h.BodyKind == codec.BodyKindRaw
		}, 34, 30, "This is a fine kettle of fish."},
		{"join ack", unhexDump(t, vectorJoinAck), func(h *codec.Head) bool {
			return h.PacketKind == codec.PacketKindAck && h.SourceID == 202 && h.DestinationID == 0 &&
				h.TransactionID == 1 && h.TransactionKind == codec.TransactionKindJoin && h.BodyKind == codec.BodyKindJSON
		}, 55, 0, ""},
		{"alive request", unhex(t, vectorAlive), func(h *codec.Head) bool {
			return h.PacketKind == codec.PacketKindRequest && h.SourceID == 202 && h.DestinationID == 102 &&
				h.SessionID == 2 && h.TransactionID == 3 && h.TransactionKind == codec.TransactionKindAlive &&
				h.FootKind == codec.FootKindNaCl && h.FootLength == 64
		}, 82, 0, ""},
		{"json head", vectorJSON, func(h *codec.Head) bool {
			return h.HeadKind == codec.HeadKindJSON && h.PacketLength == 118 && h.BodyKind == codec.BodyKindJSON
		}, 66, 52, `{"msg":"Hello Raet World","extra":"Goodby Big Moon"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r dissect.RAET
			if err := r.DecodeFromBytes(c.data, gopacket.NilDecodeFeedback); err != nil {
				t.Fatal(err)
			}
			if !c.want(&r.Head) {
				t.Fatalf("head %+v", r.Head)
			}
			if len(r.LayerContents()) != c.hl || len(r.Coat) != c.cl || string(r.Payload()) != c.payload {
				t.Fatalf("contents %d coat %d payload %q", len(r.LayerContents()), len(r.Coat), r.Payload())
			}
			if !bytes.Equal(append(append([]byte{}, r.LayerContents()...), r.LayerPayload()...), c.data) {
				t.Fatal("contents and payload do not make the packet")
			}
			if r.LayerType() != dissect.LayerTypeRAET || r.CanDecode() != dissect.LayerTypeRAET || r.NextLayerType() != gopacket.LayerTypeZero {
				t.Fatal("layer types")
			}
		})
	}
}

// unhexDump reads a Wireshark-style hex dump: hex pairs, then text after
// three spaces.
func unhexDump(t testing.TB, dump string) []byte {
	var b strings.Builder
	for _, line := range strings.Split(dump, "\n") {
		if i := strings.Index(line, "   "); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line)
	}
	return unhex(t, b.String())
}

// The decoder allocates nothing for a good packet.
func TestLayerDoesNotAllocate(t *testing.T) {
	data := unhex(t, vectorMessage)
	var r dissect.RAET
	allocs := testing.AllocsPerRun(100, func() {
		if err := r.DecodeFromBytes(data, gopacket.NilDecodeFeedback); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per decode", allocs)
	}
}

// referenceKeep writes main's keep of raet-protocol.md §7.4: its own keys
// and other as a remote (main's uid for other 102, other's for main 202).
func referenceKeep(t testing.TB) string {
	dir := filepath.Join(t.TempDir(), "main")
	k, err := keep.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	seed, err := keys.ParseSigningSeed("378f61b6b73cb051458624f9f970e4853ecc58308e69d719738ca3ed7db36ec1")
	must(err)
	pri, err := keys.ParsePrivateKey("8985d11cb2e2fecb083005f376c829b18d8f76ef7e22354a639e5682876562c5")
	must(err)
	must(k.SaveLocalRole(keep.LocalRole{Role: "main", Seed: seed, Private: pri}))
	must(k.SaveLocal(keep.LocalEstate{Name: "main", UID: 1, HA: keep.HostPort{Host: "127.0.0.1", Port: 7530},
		AHA: keep.HostPort{Port: 7530}, Role: "main", SID: 2, PUID: 102}))
	ver, err := keys.ParseVerifyKey("516b4dd774b4eeabdc8b0b2a9e7392c6cc5a6573cc7f86715ebd62e2fa15a402")
	must(err)
	pub, err := keys.ParsePublicKey("05d61b6746820505ee55768ddb5e38bc4c80e052dc1b26b7ea9db6b2c26d5a26")
	must(err)
	must(k.SaveRemoteRole(keep.RemoteRole{Role: "other", Acceptance: keep.Accepted, Verify: ver, Public: pub}))
	joined := true
	must(k.SaveRemote(keep.RemoteEstate{Name: "other", UID: 102, FUID: 202, HA: keep.HostPort{Host: "127.0.0.1", Port: 7531},
		SID: 2, Role: "other", Joined: &joined}))
	return dir
}

// udpFrame is a raw IPv4 record of a datagram to port 7530.
func udpRecord(data []byte, at time.Time) dissect.Record {
	a, b := netip.MustParseAddrPort("127.0.0.1:7531"), netip.MustParseAddrPort("127.0.0.1:7530")
	return dissect.Record{Time: at, LinkType: dissect.LinkTypeRaw, Data: rawUDP(a, b, data)}
}

// The captured vectors verify with the keep's key and the message opens
// with the key-log line.
func TestVerifyAndDecryptVectors(t *testing.T) {
	kr := dissect.NewKeyRing()
	if err := kr.AddKeep(referenceKeep(t)); err != nil {
		t.Fatal(err)
	}
	if err := kr.AddKeyLog(strings.NewReader(vectorKeyLog)); err != nil {
		t.Fatal(err)
	}
	d := dissect.NewDissector(&dissect.Config{Keys: kr})
	at := time.Date(2020, 5, 1, 0, 0, 0, 0, time.UTC)
	alive := d.Decode(udpRecord(unhex(t, vectorAlive), at))
	if alive == nil || alive.Err != nil || alive.Verified == nil || !*alive.Verified || alive.Signer != "other" {
		t.Fatalf("alive: %s", alive.AppendJSON(nil))
	}
	msg := d.Decode(udpRecord(unhex(t, vectorMessage), at.Add(time.Millisecond)))
	if msg == nil || msg.Err != nil || msg.Verified == nil || !*msg.Verified {
		t.Fatalf("message: %s", msg.AppendJSON(nil))
	}
	js := string(msg.AppendJSON(nil))
	if !strings.Contains(js, `"body":{"subject":"hello main","n":1,"from":"other"}`) {
		t.Fatalf("message body: %s", js)
	}
	// A flipped signature bit fails; another keep's key gives no key at all.
	bad := unhex(t, vectorAlive)
	bad[len(bad)-1] ^= 1
	p := d.Decode(udpRecord(bad, at.Add(2*time.Millisecond)))
	if p.Verified == nil || *p.Verified || !strings.Contains(p.VerifyNote, "does not verify") {
		t.Fatalf("bad foot: %s", p.AppendJSON(nil))
	}
	d2 := dissect.NewDissector(nil)
	p = d2.Decode(udpRecord(unhex(t, vectorAlive), at))
	if p.Verified != nil || !strings.Contains(string(p.AppendJSON(nil)), `"verified":null`) {
		t.Fatalf("no keys: %s", p.AppendJSON(nil))
	}
}

var gopacketRuns atomic.Int32

// gopacket decodes RAET in a whole frame through the port registration.
func TestGopacketDecodesRAET(t *testing.T) {
	payload := unhex(t, vectorAlive)
	frame := func(port uint16) []byte {
		eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{127, 0, 0, 1}, DstIP: net.IP{127, 0, 0, 1}}
		udp := &layers.UDP{SrcPort: 40000, DstPort: layers.UDPPort(port)}
		udp.SetNetworkLayerForChecksum(ip)
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			eth, ip, udp, gopacket.Payload(payload)); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	pkt := gopacket.NewPacket(frame(dissect.DefaultPort), layers.LayerTypeEthernet, gopacket.Default)
	l, ok := pkt.Layer(dissect.LayerTypeRAET).(*dissect.RAET)
	if !ok {
		t.Fatalf("no RAET layer in %v", pkt)
	}
	if l.Head.TransactionKind != codec.TransactionKindAlive || pkt.ApplicationLayer() != l {
		t.Fatalf("layer %+v", l.Head)
	}
	if pkt.Layer(dissect.LayerTypeRAET) == nil {
		t.Fatal("no layer")
	}
	// Registration is global and lasts: each run (-count) takes a new port.
	port := uint16(41234 + gopacketRuns.Add(1))
	if gopacket.NewPacket(frame(port), layers.LayerTypeEthernet, gopacket.Default).Layer(dissect.LayerTypeRAET) != nil {
		t.Fatal("RAET on an unregistered port")
	}
	dissect.RegisterPort(port)
	if gopacket.NewPacket(frame(port), layers.LayerTypeEthernet, gopacket.Default).Layer(dissect.LayerTypeRAET) == nil {
		t.Fatal("no RAET on a registered port")
	}
	// A bad head is a decode failure with the reason.
	payload = []byte("ri RAET\npl 0010\n")
	pkt = gopacket.NewPacket(frame(dissect.DefaultPort), layers.LayerTypeEthernet, gopacket.Default)
	if pkt.ErrorLayer() == nil || !strings.Contains(pkt.ErrorLayer().Error().Error(), "truncated head") {
		t.Fatalf("error layer %v", pkt.ErrorLayer())
	}
	// A lane record decodes to its page.
	var rec bytes.Buffer
	pw, _ := dissect.NewPcapngWriter(&rec, nil)
	if err := pw.WriteLane(time.Unix(0, 0), "/a", "/b", true, []byte("ri RAET\nvn 0\npk 0\nsn a\ndn b\nsi 661752e96abf6110ed\nbi 1\npn 0000\npc 0001\n\n{}")); err != nil {
		t.Fatal(err)
	}
	r := readAll(t, bytes.NewReader(rec.Bytes()))[0]
	lp := gopacket.NewPacket(r.Data, dissect.LayerTypeLaneRecord, gopacket.Default)
	lane, ok := lp.Layer(dissect.LayerTypeRAETLane).(*dissect.Lane)
	if !ok || lane.Head.Source != "a" || string(lane.Body) != "{}" {
		t.Fatalf("lane: %v", lp)
	}
}

// seedPayloads are the datagrams of the golden captures.
func seedPayloads(t testing.TB) [][]byte {
	var out [][]byte
	paths := []string{testdata("road.pcapng"), testdata("segmented.pcapng"), testdata("bad.pcapng"), bundleCapture(t)}
	for _, path := range paths {
		for _, rec := range readRecords(t, path) {
			if rec.LinkType != dissect.LinkTypeRaw || len(rec.Data) < 28 || rec.Data[0]>>4 != 4 {
				continue
			}
			out = append(out, rec.Data[28:])
		}
	}
	return out
}

// FuzzDecodeFromBytes decodes arbitrary datagrams with the RAET layer and
// the whole dissector (with keys). A decoded head must re-encode to a head
// that decodes to the same values, and the parts must make the packet.
func FuzzDecodeFromBytes(f *testing.F) {
	for _, p := range seedPayloads(f) {
		f.Add(p)
	}
	f.Add(vectorRaw)
	f.Add(vectorJSON)
	f.Add(unhex(f, vectorAlive))
	f.Add(unhex(f, vectorMessage))
	// Super-datagrams, as a capture on lo sees UDP GSO: two packets of one
	// size and a shorter one.
	seeds := seedPayloads(f)
	for i := 0; i+2 < len(seeds); i++ {
		if len(seeds[i]) == len(seeds[i+1]) && len(seeds[i+2]) < len(seeds[i]) {
			f.Add(append(append(append([]byte(nil), seeds[i]...), seeds[i+1]...), seeds[i+2]...))
			break
		}
	}
	kr := keyRing(f, scenarios[0], nil)
	kr.AddKeyLog(strings.NewReader(vectorKeyLog))
	at := time.Unix(1700000000, 0)
	f.Fuzz(func(t *testing.T, data []byte) {
		var r dissect.RAET
		err := r.DecodeFromBytes(data, gopacket.NilDecodeFeedback)
		if err == nil {
			if len(r.LayerContents())+len(r.LayerPayload()) != len(data) || int(r.Head.PacketLength) != len(data) {
				t.Fatalf("parts %d+%d of %d", len(r.LayerContents()), len(r.LayerPayload()), len(data))
			}
			c, err := codec.Lookup(r.Head.HeadKind)
			if err != nil {
				t.Fatal(err)
			}
			h := r.Head
			head, err := c.Append(nil, &h)
			if err == nil {
				hn := len(head)
				pkt := append(head, r.LayerPayload()...)
				if err := c.SetPacketLength(pkt[:hn], len(pkt)); err == nil {
					var again dissect.RAET
					if err := again.DecodeFromBytes(pkt, nil); err != nil {
						t.Fatalf("re-encoded head does not decode: %v\n%q", err, pkt)
					}
					h2 := again.Head
					h.PacketLength, h.HeadLength = h2.PacketLength, h2.HeadLength
					if !h.Equal(&h2) {
						t.Fatalf("round trip: %+v != %+v", h, h2)
					}
				}
			}
		} else if !dissect.HeadDecoded(err) && err.Error() == "" {
			t.Fatal("an error without a reason")
		}
		d := dissect.NewDissector(&dissect.Config{Keys: kr})
		for i := 0; i < 2; i++ {
			p := d.Decode(udpRecord(data, at.Add(time.Duration(i)*time.Millisecond)))
			if p == nil {
				t.Fatal("a datagram to port 7530 was skipped")
			}
			for ok := true; ok; ok = d.Next(p) {
				if !p.Parsed && p.Err == nil {
					t.Fatal("not parsed, and no error")
				}
				p.AppendJSON(nil)
			}
		}
		d.Flush()
	})
}
