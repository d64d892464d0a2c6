// Command raet-netem runs programs over an emulated network link: two
// network namespaces joined by a userspace TUN bridge that impairs every IP
// packet (UDP, TCP, ICMP) as a netsim scenario file says, with delay,
// jitter, loss in bursts or not, rate with a drop-tail queue, duplication
// and reordering. It is for kernels without tc netem, and for runs that
// must share a scenario with netsim's in-process tests.
//
//	raet-netem -scenario wan.yaml -check
//	raet-netem -scenario wan.yaml -- CLIENT ARGS -- SERVER ARGS
//	raet-netem -scenario wan.yaml -hold
//	raet-netem -cleanup
//
// The bridge's reader and forwarder threads are locked to OS threads with
// SCHED_FIFO, wait in ppoll and write each packet when netsim's engine says
// it is due. At start a short UDP probe measures the delay each way and how
// late the bridge wrote packets; a run whose p99 lateness exceeds 5% of the
// one-way delay (at least 1 ms) is refused, at start or at the end. Run it
// with -help for the modes, output and exit status. Linux only; needs root.
package main
