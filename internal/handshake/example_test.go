package handshake_test

import (
	"fmt"

	"github.com/raet-go/raet/internal/handshake"
	"github.com/raet-go/raet/keys"
)

// One allow handshake between an initiator I and a correspondent R that are
// already joined (each knows the other's long-term public key and uids).
func Example() {
	must := func(b keys.Box, err error) keys.Box {
		if err != nil {
			panic(err)
		}
		return b
	}
	iLong, rLong := must(keys.GenerateBox()), must(keys.GenerateBox())
	const iUidForR, rUidForI = 0xca, 0x66 // I's nuid of R, R's nuid of I

	// I: a fresh short-term pair, then the hello; it keeps the hello's key
	// to open the cookie with.
	iShort := must(keys.GenerateBox())
	hello, helloKey, _ := handshake.MakeHello(nil, iShort, rLong.Public)

	// R: check the hello, make its own short-term pair, answer with a cookie
	// (boxed with the hello's key) and keep the oreo and I's short-term key.
	iShortPub, rHelloKey, err := handshake.OpenHello(hello, rLong.Private)
	if err != nil {
		fmt.Println("reject:", err)
		return
	}
	rShort := must(keys.GenerateBox())
	cookie, oreo, _ := handshake.MakeCookie(nil, rHelloKey, rShort.Public, rUidForI, iUidForR)

	// I: open the cookie (seid must be its fuid of R, deid its nuid of R),
	// then send the initiate.
	c, err := handshake.OpenCookie(cookie, helloKey, rUidForI, iUidForR)
	if err != nil {
		fmt.Println("reject:", err)
		return
	}
	initiate, iSession, _ := handshake.MakeInitiate(nil, iShort, iLong, c.RShortPub, rLong.Public, c.Oreo, "main.example.com")

	// R: check the initiate against what it kept and the joined key.
	in, rSession, err := handshake.OpenInitiate(initiate, rShort.Private, rLong.Private, handshake.InitiateWant{
		IShortPub: iShortPub, Oreo: oreo, ILongPub: iLong.Public, FQDN: "main.example.com",
	})
	if err != nil {
		fmt.Println("reject:", err)
		return
	}
	fmt.Println("sizes:", len(hello), len(cookie), len(initiate))
	fmt.Println("fqdn:", in.FQDN, in.FQDNMatch)
	fmt.Println("session keys agree:", c.RShortPub == rShort.Public && *iSession == *rSession)
	// Output:
	// sizes: 200 104 328
	// fqdn: main.example.com true
	// session keys agree: true
}
