package handshake

import (
	"strings"
	"testing"
)

func BenchmarkMakeHello(b *testing.B) {
	f := newFlow(b)
	for b.Loop() {
		if _, _, err := MakeHello(nil, f.i.short, f.r.long.Public); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenHello(b *testing.B) {
	f := newFlow(b)
	for b.Loop() {
		if _, _, err := OpenHello(f.hello, f.r.long.Private); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMakeCookie(b *testing.B) {
	f := newFlow(b)
	k := boxKey(f.r.long.Private, f.i.short.Public) // OpenHello's, once
	for b.Loop() {
		if _, _, err := MakeCookie(nil, k, f.r.short.Public, f.r.uid, f.i.uid); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenCookie(b *testing.B) {
	f := newFlow(b)
	k := boxKey(f.i.short.Private, f.r.long.Public) // MakeHello's, once
	for b.Loop() {
		if _, err := OpenCookie(f.cookie, k, f.r.uid, f.i.uid); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMakeInitiate(b *testing.B) {
	f := newFlow(b)
	for b.Loop() {
		if _, _, err := MakeInitiate(nil, f.i.short, f.i.long, f.r.short.Public, f.r.long.Public, f.oreo, f.r.fqdn); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenInitiate(b *testing.B) {
	f := newFlow(b)
	w := f.want()
	for b.Loop() {
		if _, _, err := OpenInitiate(f.initiate, f.r.short.Private, f.r.long.Private, w); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseKeyLog(b *testing.B) {
	f := newFlow(b)
	text := strings.Repeat(FormatKeyLog(f.i.short.Public, f.i.short.Private, f.r.short.Public), 100)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := ParseKeyLog(strings.NewReader(text)); err != nil {
			b.Fatal(err)
		}
	}
}
