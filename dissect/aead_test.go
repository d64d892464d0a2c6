package dissect_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/internal/handshake"
	"github.com/raet-go/raet/keys"
	"github.com/raet-go/raet/packet"
	"golang.org/x/crypto/nacl/box"
)

// aeadCapture writes a capture of one AEAD session made with the
// packet-level code: for each AEAD kind, a small message from a to b, a
// message in segments, each sealed on its own, and b's done.
func aeadCapture(t *testing.T) string {
	path, _ := aeadCaptureKeys(t)
	return path
}

// aeadCaptureKeys is aeadCapture, with a key log that has only a's side of
// each session (RAET_SESSION lines, as a's stack writes them).
func aeadCaptureKeys(t *testing.T) (string, string) {
	t.Helper()
	a, b := netip.MustParseAddrPort("127.0.0.1:7530"), netip.MustParseAddrPort("127.0.0.1:7531")
	path := filepath.Join(t.TempDir(), "aead.pcapng")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := dissect.NewPcapngWriter(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := codec.Lookup(codec.HeadKindBinary)
	if err != nil {
		t.Fatal(err)
	}
	pk := &packet.Packer{Codec: hc, Foot: packet.NadaFoot{}, MaxPacketSize: 600}
	apub, apriv, _ := box.GenerateKey(rand.Reader)
	bpub, bpriv, _ := box.GenerateKey(rand.Reader)
	t0 := time.Unix(1700000000, 0)
	n := 0
	var keylog strings.Builder
	write := func(src, dst netip.AddrPort, d []byte) {
		if err := w.WriteRoad(t0.Add(time.Duration(n)*time.Millisecond), src, dst, d); err != nil {
			t.Fatal(err)
		}
		n++
	}
	for si, kind := range []codec.CoatKind{codec.CoatKindAES256GCM, codec.CoatKindChaCha20Poly1305} {
		atb, err := packet.NewAEADCoat(kind, apriv, bpub)
		if err != nil {
			t.Fatal(err)
		}
		bta, err := packet.NewAEADCoat(kind, bpriv, apub)
		if err != nil {
			t.Fatal(err)
		}
		keylog.WriteString(handshake.FormatKeyLog(keys.PublicKey(*apub), keys.PrivateKey(*apriv), keys.PublicKey(*bpub)))
		var h codec.Head
		h.Reset()
		h.SourceID, h.DestinationID, h.SessionID, h.TransactionID, h.BodyKind = 2, 3, uint32(si+1), 10, codec.BodyKindJSON
		small, err := pk.PackAEAD(nil, &h, atb, []byte(`{"hello":"b"}`))
		if err != nil {
			t.Fatal(err)
		}
		write(a, b, small)
		h.TransactionID = 11
		body := append([]byte(`{"d":"`), append(bytes.Repeat([]byte("s"), 2000), `"}`...)...)
		segSize, count, err := pk.SegmentsAEAD(&h, atb, len(body))
		if err != nil || count < 2 {
			t.Fatalf("%d segments: %v", count, err)
		}
		for i := range count {
			sh := h
			seg, err := pk.PackSegmentAEAD(nil, &sh, atb, nil, body, i, segSize, count)
			if err != nil {
				t.Fatal(err)
			}
			write(a, b, seg)
		}
		d := h
		d.SourceID, d.DestinationID, d.PacketKind = 3, 2, codec.PacketKindDone
		d.SetCorrespondent(true)
		done, err := pk.PackAEAD(nil, &d, bta, nil)
		if err != nil {
			t.Fatal(err)
		}
		write(b, a, done)
		// A new session: new short-term keys, as each allow makes.
		apub, apriv, _ = box.GenerateKey(rand.Reader)
		bpub, bpriv, _ = box.GenerateKey(rand.Reader)
	}
	kl := filepath.Join(filepath.Dir(path), "keys.log")
	if err := os.WriteFile(kl, []byte(keylog.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, kl
}

// With the key log of one side of each session, raetdump opens the AEAD
// coats of both directions (the same shared key gives both directions'
// keys): every body is read, segments opened one by one and reassembled,
// every packet authenticated; a packet changed in one bit is an error, and
// the same datagram twice a replay.
func TestDissectAEADOpened(t *testing.T) {
	path, kl := aeadCaptureKeys(t)
	keys := dissect.NewKeyRing()
	if err := keys.AddKeyLogFile(kl); err != nil {
		t.Fatal(err)
	}
	d := dissect.NewDissector(&dissect.Config{Keys: keys})
	frames, bodies, fromB := 0, 0, 0
	var last dissect.Record
	for _, rec := range readRecords(t, path) {
		last = rec
		p := d.Decode(rec)
		frames++
		if p.Err != nil || !p.Parsed {
			t.Fatalf("frame %d: %v", p.N, p.Err)
		}
		if p.Verified == nil || !*p.Verified {
			t.Fatalf("frame %d (%s): not authenticated: %s", p.N, p.Head.PacketKind, p.VerifyNote)
		}
		if p.Src.Port() == 7531 {
			fromB++
		}
		if p.HasBody {
			bodies++
			if v, ok := p.Body.Get("d"); ok && len(v.(string)) != 2000 {
				t.Fatalf("frame %d: reassembled body of %d bytes", p.N, len(v.(string)))
			}
		}
	}
	// Each session: the small message, the segmented one and b's done
	// (an empty body) are read.
	if bodies != 6 || fromB != 2 {
		t.Fatalf("%d bodies, %d packets from b", bodies, fromB)
	}
	// The last datagram again: a replay of its session's counter.
	if p := d.Decode(last); p.Err == nil || !errors.Is(p.Err, packet.ErrReplayed) {
		t.Fatalf("a datagram twice: %v", p.Err)
	}
	// One bit changed: does not authenticate under its session's key.
	last.Data[len(last.Data)-1] ^= 1
	if p := d.Decode(last); p.Err == nil {
		t.Fatal("a changed datagram opened")
	}
	d.Flush()
	st := d.Stats()
	if st.AEAD != frames || st.AEADOpened != frames || st.Sealed != 0 || st.Errors != 2 {
		t.Fatalf("stats: %d aead, %d opened of %d frames, %d sealed, %d errors", st.AEAD, st.AEADOpened, frames, st.Sealed, st.Errors)
	}
	if m := st.Txns[codec.TransactionKindMessage]; m == nil || m.Done != 2 || m.Reassembled != 2 {
		t.Fatalf("message transactions %+v", m)
	}
}

// raetdump cannot open AEAD coats (their keys are per direction, from the
// session's short-term keys): it shows them sealed, with their kind, and
// as authenticated by their coat, with no error; their segments are still
// tracked and the message counted as reassembled.
func TestDissectAEADSealed(t *testing.T) {
	f, err := os.Open(aeadCapture(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cr, err := dissect.NewCaptureReader(f)
	if err != nil {
		t.Fatal(err)
	}
	d := dissect.NewDissector(nil)
	frames := 0
	for {
		rec, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := d.Decode(rec)
		frames++
		if p.Err != nil || !p.Parsed {
			t.Fatalf("frame %d: %v", p.N, p.Err)
		}
		if !strings.Contains(p.VerifyNote, "coat authenticates it") {
			t.Fatalf("frame %d: verify note %q", p.N, p.VerifyNote)
		}
		if p.Head.PacketKind == codec.PacketKindMessage && !p.Head.Segment() {
			want := "sealed: " + p.Head.CoatKind.String() + " coat (ck "
			if !strings.Contains(p.BodyNote, want) {
				t.Fatalf("frame %d: body note %q, want %q", p.N, p.BodyNote, want)
			}
		}
	}
	d.Flush()
	st := d.Stats()
	if st.Errors != 0 || len(st.Warnings) != 0 || st.AEAD != frames || st.Unsigned != 0 || st.Sealed < 4 {
		t.Fatalf("stats: %d errors %v, warnings %v, %d aead of %d frames, %d unsigned, %d sealed",
			st.Errors, st.ErrorReasons, st.Warnings, st.AEAD, frames, st.Unsigned, st.Sealed)
	}
	if m := st.Txns[codec.TransactionKindMessage]; m == nil || m.Done != 2 {
		t.Fatalf("message transactions %+v", m)
	}
}
