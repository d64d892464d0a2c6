package core

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

// sink drops what c queued to send.
func sink(c *Core) {
	out := c.TakeOut(nil)
	for i := range out {
		out[i].Release()
	}
	c.tx.out = out[:0]
	c.ClearEvents()
}

// BenchmarkForgedDatagram is the receive cost of one forged datagram of
// each kind at a main estate with an established session, as a running
// stack pays it: the reader's parse and foot check, then the owner's
// handling (and any budgeted reply).
func BenchmarkForgedDatagram(b *testing.B) {
	for _, pr := range profiles {
		p := joinedPair(b, pr)
		for i := range 3 {
			if err := p.send(p.other, map[string]any{"n": i}); err != nil {
				b.Fatal(err)
			}
		}
		m, r := p.main, p.mainRemote()
		var signed []byte // the last signed message other sent
		for _, w := range p.wire {
			var pk packet.Packet
			if w.from == p.other && packet.Parse(w.b, &pk) == nil && pk.Head.PacketKind == codec.PacketKindMessage {
				signed = w.b
			}
		}
		otherBytes := bytes.Clone(signed)
		otherBytes[bytes.Index(otherBytes, []byte("\nti "))+4] ^= 1 // same foot, other bytes
		badSig := bytes.Clone(signed)
		badSig[len(badSig)-1] ^= 1
		alive := head(codec.TransactionKindAlive, codec.PacketKindRequest, r.fuid, r.nuid, r.rsid+1, 1000, false)
		msg := head(codec.TransactionKindMessage, codec.PacketKindMessage, r.fuid, r.nuid, r.rsid+1, 1000, false)
		msg.CoatKind = codec.CoatKindNaCl
		cases := []struct {
			name string
			b    []byte
			vary bool // a new foot every time (its last 8 bytes)
		}{
			{"garbage", []byte("GET / HTTP/1.1\r\n\r\n"), false},
			{"unsigned-alive-newer-si", forge(b, codec.HeadKindRaet, nil, alive, nil), false},
			{"unsigned-message", forge(b, codec.HeadKindRaet, nil, msg, make([]byte, 200)), false},
			{"stranger-join", p.namedJoin(b, "stranger"), false},
			{"replayed-message", signed, false},
			{"reused-foot-other-bytes", otherBytes, false},
			{"bad-foot-repeated", badSig, false},
			{"bad-foot-each-new", badSig, true},
		}
		for _, cs := range cases {
			b.Run(pr.name+"/"+cs.name, func(b *testing.B) {
				var n atomic.Uint64
				feet := NewFootChecker(&n)
				table := keyTableOf(r.nuid, newPeerKeys(r.verify, nil))
				from := netip.MustParseAddrPort("127.66.0.1:9999")
				b.ReportAllocs()
				dg := bytes.Clone(cs.b)
				i := uint64(0)
				for b.Loop() {
					if cs.vary {
						i++
						binary.LittleEndian.PutUint64(dg[len(dg)-8:], i)
					}
					var in Inbound
					feet.Parse(&in, dg, from, table)
					m.Receive(&in, p.now)
					sink(m)
				}
				b.ReportMetric(float64(n.Load())/float64(b.N), "verifies/op")
			})
		}
	}
}

// BenchmarkReceivedMessages has main receive b.N messages in one session
// (fast profile) and reports its heap after them: the replay window is
// fixed, so the heap does not grow with the count (the reference's done
// list, and ours before it, kept ~109 B a message for 10 minutes). For the
// figure of issue 11: -bench=ReceivedMessages -benchtime=1800000x.
func BenchmarkReceivedMessages(b *testing.B) {
	p := newPair(b, keep.AutoAlways, func(m, o *estate) { m.ReceiveQueue = 1 << 20 })
	p.join()
	o := p.otherRemote()
	body, err := p.other.marshal(map[string]any{"n": 1})
	if err != nil {
		b.Fatal(err)
	}
	heap := func() float64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapAlloc) / (1 << 20)
	}
	delivered := 0
	flush := func() {
		p.pump()
		delivered += len(p.delivered[p.main])
		p.delivered[p.main] = p.delivered[p.main][:0]
		p.delivered[p.other] = p.delivered[p.other][:0]
		clear(p.wire)
		p.wire = p.wire[:0]
	}
	before := heap()
	b.ResetTimer()
	for i := range b.N {
		p.other.now = p.now
		p.other.startMessenger(o, body, nil, p.other.cfg.BodyKind, MsgID{}, nil, p.now)
		if i%256 == 255 {
			flush()
		}
	}
	flush()
	b.StopTimer()
	if delivered != b.N {
		b.Fatalf("%d of %d messages delivered", delivered, b.N)
	}
	after := heap()
	b.ReportMetric(after, "heap-MiB")
	b.ReportMetric((after-before)*(1<<20)/float64(b.N), "heap-B/msg")
}
