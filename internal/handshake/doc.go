// Package handshake builds and opens the raw bodies of the RAET allow
// transaction (tk=3), the CurveCP-style exchange that gives both sides of a
// joined pair fresh short-term Curve25519 keys (raet-protocol.md §8.3). It
// also formats and parses the key-log lines that let a dissector decrypt a
// captured session.
//
// Everything here is a pure function of its arguments: no sockets, no
// timers, no state. The road stack keeps what one step needs for the next
// (the initiator's short-term pair, the oreo it issued) and drives the
// transaction; this package only turns values into bodies and back. The
// bodies are byte-exact with the reference (RaetProtocol/raet 0.6.9,
// raet/road/transacting.py, Allower and Allowent).
//
// I is the initiator (Allower), R the correspondent (Allowent). "box(m; a, B)"
// is NaCl crypto_box of m with private key a and public key B under a random
// 24-byte nonce; its output is the 16-byte Poly1305 tag followed by the
// encrypted bytes (libsodium crypto_box_afternm as libnacl returns it, and
// golang.org/x/crypto/nacl/box.Seal). Each box is followed by its nonce, never
// preceded. Integers are unsigned 32-bit big-endian (network order). There
// is no padding between fields.
//
//	hello, I -> R, pk=6, HelloSize = 200 bytes
//	  0   64  plain        64 ASCII '0' (the hex of 32 zero bytes)
//	 64   32  I short pub
//	 96   80  box(plain; I short pri, R long pub)
//	176   24  its nonce
//
//	cookie, R -> I, pk=7, CookieSize = 104 bytes
//	  0   80  box(stuff; R long pri, I short pub)
//	 80   24  its nonce
//	  stuff, 64 bytes:
//	  0   32  R short pub
//	 32    4  seid: R's uid for I (R's nuid of I, I's fuid of R)
//	 36    4  deid: I's uid for R (R's fuid of I, I's nuid of R)
//	 40   24  oreo: 24 random bytes R must keep until the initiate
//
//	initiate, I -> R, pk=8, InitiateSize = 328 bytes
//	  0   32  I short pub (the one of the hello)
//	 32   24  oreo (the one of the cookie)
//	 56  248  box(stuff; I short pri, R short pub)
//	304   24  its nonce
//	  stuff, 232 bytes:
//	  0   32  I long pub
//	 32   48  vouch: box(I short pub; I long pri, R long pub)
//	 80   24  the vouch's nonce
//	104  128  fqdn: I's idea of R's fully qualified domain name, ASCII
//	          (other characters dropped), padded with spaces or cut to 128
//
// The four checks R makes on an initiate (its short pub, the oreo, the
// long-term key, the vouch) are all made by OpenInitiate. A different fqdn
// is not an error: the reference only logs it, and Initiate.FQDNMatch
// reports it.
//
// Errors are *Error values naming the step and the failed check; branch on
// the cause with errors.Is and the sentinels ErrLength, ErrOpen, ErrMismatch,
// ErrKey and ErrRandom. No input makes a function of this package panic
// (the reference raises an uncaught exception when a hello or initiate box
// fails to open).
//
// Like libsodium, which the reference uses, the shared key of a box is
// refused (ErrKey) when the public key is of low order, so that the X25519
// shared secret would be all zeros. golang.org/x/crypto/nacl/box.Precompute
// alone would accept such a key.
//
// A step that computes the shared key (Key) of a pair of keys returns it
// for the next box between the same pairs: MakeHello's and OpenHello's open
// and seal the cookie, and MakeInitiate's and OpenInitiate's are the
// session's, from which its coats are made (packet.SessionKeyOf). Each side
// then makes three X25519s an allow, one for each distinct pair of keys.
package handshake
