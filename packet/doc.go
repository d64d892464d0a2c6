// Package packet builds and takes apart RAET road packets: head, body,
// coat and foot.
//
// A road packet (raet-protocol.md §3) is
//
//	+------------------+--------------------------------+----------------+
//	| head (hl bytes)  | coat (body, maybe encrypted)   | foot (fl bytes)|
//	+------------------+--------------------------------+----------------+
//	 <---------------------------- pl bytes ---------------------------->
//
// The head is text (native or JSON) and is encoded by the codecs of
// package codec; it names the kinds of the three other layers:
//
//   - Body (bk): the message, a mapping serialized as json, msgpack or
//     cbor, or raw bytes (Serializer; a Registry per stack finds the one of
//     each kind, SerializerFor in the process-wide one). An empty mapping
//     is zero bytes; what a kind cannot carry is refused (ErrCannotCarry).
//   - Coat (ck): the body as it is (nada) or sealed in a NaCl crypto_box
//     under the session's short-term keys, box || nonce (Coat, NaClCoat).
//     An empty body is an empty coat. Between raet-go estates, the AEAD
//     coat (AEADCoat: AES-256-GCM or ChaCha20-Poly1305, a packet counter,
//     the head as associated data, a replay window) replaces coat and
//     foot at once; see docs/aead.md.
//   - Foot (fk): nothing, an Ed25519 signature over head || coat || 64
//     zero bytes, or the MAC foot of raet-go (Foot, NaClFoot, MACFoot).
//
// Sending a packet: serialize the body, seal it into the coat, build the
// head with the final pl, hl and fl, then Sign the buffer head || coat,
// which appends the foot. Receiving: parse the head, Verify the foot over
// the bytes before it, Open the coat and Unmarshal the body.
//
// The layers append into caller buffers (append-style Marshal, Seal, Open,
// Sign) so that a sender that sizes its buffer once allocates nothing on
// the seal and sign path. Nothing here panics on wire input: malformed
// bytes give typed errors (*BodyError, *CoatError, *FootError) wrapping
// sentinels to test with errors.Is.
package packet
