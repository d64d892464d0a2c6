package road

// minReadBatch is the fewest buffers a reader offers a read; it offers up
// to ioBatch while the reads fill them.
const minReadBatch = 4

// minRecvSize is the least a stack reads of a datagram: what the reference
// reads (twice its 1024-byte packets), so that every datagram a reference
// estate sends fits.
const minRecvSize = 2048

// recvSize is the length of the stack's read buffers: the largest datagram
// it can receive. A peer sends at most its MaxPacketSize in the reference
// profile and at most the smaller of the two FastMaxPacketSizes in the fast
// one, so the stack reads the larger of its own two limits (the estates of
// one road share them), and at least minRecvSize. A longer datagram is cut
// short by the system, skipped and counted in Counters.Drops
// ["unreadable"].
func recvSize(c *Config) int {
	return max(c.MaxPacketSize, c.FastMaxPacketSize, minRecvSize)
}
