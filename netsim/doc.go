// Package netsim simulates an impaired network in userspace for tests of
// UDP code: delay and jitter (in order, or reordering if asked), bandwidth
// (a token bucket with a drop-tail queue), loss (random, and in bursts by a
// Gilbert-Elliott channel), duplication and reordering, drawn from seeded
// pseudo-random sources so that a failing run can be replayed from its
// seed. Impairments change while datagrams flow.
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
// A [Scenario] (a small YAML file: per direction delay, jitter, loss,
// rate, queue) describes a link once for this package and for
// cmd/raet-netem, which shapes real processes' traffic between network
// namespaces the same way.
//
// netsim reads time through the time package only, so a [Network] made
// inside a testing/synctest bubble runs on the bubble's fake clock: a test
// can send ten thousand datagrams over a 50 ms link in milliseconds, and
// the arrival times it sees are exact and reproducible.
//
// Nothing here sends traffic anywhere but the loopback interface: a Relay
// refuses endpoints that are not loopback addresses, and a Network never
// touches a socket.
package netsim
