// Package keys holds the fixed-size long-term key types of a RAET estate and
// their lowercase hexadecimal text form, as the reference stores them in keeps
// and sends them in join bodies.
//
// An estate has two key pairs:
//
//	name    type         what
//	sighex  SigningSeed  Ed25519 seed (libsodium crypto_sign_seed_keypair input), secret
//	verhex  VerifyKey    Ed25519 public key derived from the seed
//	prihex  PrivateKey   Curve25519 private key, secret
//	pubhex  PublicKey    Curve25519 public key = X25519(prihex, basepoint)
//
// Every type is a [Size]byte array. Its zero value means "no key"; IsZero
// reports it. Equal compares in constant time. Hex and MarshalText give 64
// lowercase hex digits; the Parse functions and UnmarshalText accept upper or
// lower case and nothing else (no raw bytes, no prefix, no whitespace).
//
// The secret types (SigningSeed, PrivateKey) print as a redacted placeholder
// through String and GoString, so a key that reaches a log line or a %v verb
// does not leak. Their Hex and MarshalText still give the real digits, because
// the keep must write them.
//
// PrivateKey.PublicKey and PrivateKey.SharedKey (crypto_box_beforenm, the key
// of every NaCl box between two pairs) are the one home of the road's X25519:
// curve25519-voi's, one scalar multiplication per shared key and a table for
// the base point (golang.org/x/crypto/curve25519 goes through crypto/ecdh,
// which derives the public key of every private key it is given first, so a
// shared key cost two multiplications there and box.Precompute two more).
package keys
