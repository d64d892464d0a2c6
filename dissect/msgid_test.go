package dissect_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road"
)

// Between raet-go estates a message's coat carries a message id envelope
// before the body: the dissector shows the id and decodes the body after it
// (in a NaCl coat, which the key log opens; AEAD coats it does not open).
func TestMessageIDEnvelope(t *testing.T) {
	k, buf := newKit(t)
	main := k.stack(road.Config{Name: "main", Main: true, AEAD: road.AEADRefuse}, true)
	other := k.stack(road.Config{Name: "other", AEAD: road.AEADRefuse}, false)
	c := ctx(t)
	if _, err := other.Join(c, main.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if err := other.Send(c, "main", packet.OrderedMap{{Key: "subject", Value: "with an id"}}); err != nil {
		t.Fatal(err)
	}
	recv(t, main)
	k.closeAll()
	if err := k.pw.Err(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mid.pcapng")
	write(t, path, buf.Bytes())
	keys := dissect.NewKeyRing()
	if err := keys.AddKeyLog(strings.NewReader(k.keylog["main"].String())); err != nil {
		t.Fatal(err)
	}
	lines, st := dissectFile(t, path, keys)
	var found bool
	for _, l := range lines {
		if strings.Contains(l, `"subject":"with an id"`) {
			found = true
			if !strings.Contains(l, `"mid":{"stream":`) {
				t.Errorf("the message's id is not shown: %s", l)
			}
		}
	}
	if !found {
		t.Fatalf("no message with its body among:\n%s", strings.Join(lines, "\n"))
	}
	if st.Errors != 0 {
		t.Errorf("%d packets with errors: %v", st.Errors, st.ErrorReasons)
	}
}
