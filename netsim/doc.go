// Package netsim simulates an impaired network in userspace for tests: loss,
// duplication, reordering, delay and jitter, drawn from a seeded
// pseudo-random source so that a failing run can be replayed from its seed.
//
// It offers two ways to put impairments between two stacks:
//
//   - [Relay] forwards real UDP datagrams between two loopback sockets that
//     do not know about it. Each endpoint sends to the relay's stand-in for
//     the other, and replies to the source address of what it receives reach
//     the other side, impaired per direction.
//   - [Network] is an in-memory network of [net.PacketConn]s, addressed by
//     [netip.AddrPort], with impairments applied on delivery to each
//     listener and changeable at run time per link (for partitions and
//     healing). It needs no sockets, so it suits many estates in one test.
//
// Both run every datagram through the same engine, described by
// [Impairment]; its zero value is a perfect link. Delayed datagrams wait in
// one bounded, heap-ordered delay queue served by a single goroutine that
// exists only while datagrams are in flight; Close stops it.
//
// Nothing here sends traffic anywhere but the loopback interface: a Relay
// refuses endpoints that are not loopback addresses, and a Network never
// touches a socket.
package netsim
