package builtin_test

import (
	"errors"
	"testing"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/plugins/builtin"
)

func TestSerializers(t *testing.T) {
	for _, name := range builtin.Serializers {
		s, err := builtin.Serializer(name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Marshal(nil, map[string]any{"a": int64(1)})
		if err != nil {
			t.Fatal(name, err)
		}
		var m map[string]any
		if err := s.Unmarshal(b, &m); err != nil || m["a"] != int64(1) {
			t.Fatalf("%s: %v %v", name, m, err)
		}
	}
	if _, err := builtin.Serializer("raw"); err == nil {
		t.Fatal("raw is not a mapping serializer")
	}
}

func TestMemQueueBounds(t *testing.T) {
	q := builtin.NewMemQueue(2, 10)
	a, err := q.Put("x", codec.BodyKindJSON, []byte("12345"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Put("x", codec.BodyKindJSON, []byte("123456")); !errors.Is(err, builtin.ErrQueueFull) {
		t.Fatalf("over the byte bound: %v", err)
	}
	b, _ := q.Put("y", codec.BodyKindJSON, []byte("1"))
	if _, err := q.Put("y", codec.BodyKindJSON, nil); !errors.Is(err, builtin.ErrQueueFull) {
		t.Fatalf("over the count bound: %v", err)
	}
	p, _ := q.Pending()
	if len(p) != 2 || p[0].ID != a || p[1].ID != b || string(p[0].Body) != "12345" {
		t.Fatalf("pending %+v", p)
	}
	q.Done(a)
	q.Done(a)
	if q.Len() != 1 {
		t.Fatal(q.Len())
	}
	if _, err := q.Put("x", codec.BodyKindJSON, []byte("123456789")); err != nil {
		t.Fatalf("room after done: %v", err)
	}
}

func TestNaClCoat(t *testing.T) {
	var a, b [32]byte
	a[0], b[0] = 1, 2
	// Public keys from the private ones.
	pa, pb := pub(t, &a), pub(t, &b)
	ca, err := builtin.NaClCoat(&a, pb)
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := builtin.NaClCoat(&b, pa)
	c, err := ca.Seal(nil, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := cb.Open(nil, c)
	if err != nil || string(p) != "hello" {
		t.Fatalf("%q %v", p, err)
	}
}
