package core

import (
	"math/bits"
	"sync"
)

// bufPool recycles the buffers of the datagrams the stack sends and does
// not keep (message segments, acks, dones): the owner takes one per packet
// and the writer gives it back once the system has the datagram. Buffers
// come in power-of-two size classes from 2 KiB to 64 KiB, so a pool serves
// every packet size limit a profile may have.
type bufPool struct {
	classes [bufClasses]sync.Pool
	// given, when set, sees each buffer given back before the pool keeps
	// it: the tests' (bodypool_test.go), which spoil it, so that a body
	// still read after its buffer went back shows.
	given func(*[]byte)
}

const (
	minBufShift = 11 // 2 KiB
	bufClasses  = 6  // up to 64 KiB
)

// bufClass is the smallest class holding n bytes (n ≤ 64 KiB).
func bufClass(n int) int {
	if n <= 1<<minBufShift {
		return 0
	}
	return min(bits.Len(uint(n-1))-minBufShift, bufClasses-1)
}

// get returns an empty buffer with room for n bytes (n ≤ 64 KiB).
func (p *bufPool) get(n int) *[]byte {
	c := bufClass(n)
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		*b = (*b)[:0]
		return b
	}
	b := make([]byte, 0, 1<<(minBufShift+c))
	return &b
}

// maxBodyBuffer is the largest buffer the pool keeps: its largest class.
const maxBodyBuffer = 1 << (minBufShift + bufClasses - 1)

// put gives b back (nil: nothing). A buffer that grew into another class
// goes to that one; one that grew beyond the largest is left to the
// collector.
func (p *bufPool) put(b *[]byte) {
	if b == nil || cap(*b) > maxBodyBuffer {
		return
	}
	if p.given != nil {
		p.given(b)
	}
	c := bufClass(cap(*b))
	if cap(*b) < 1<<(minBufShift+c) {
		c-- // between classes: it serves the smaller one
	}
	if c >= 0 {
		p.classes[c].Put(b)
	}
}

// bodies recycles the buffers of the bodies sent (BodyBuffer), for every
// core: a caller takes one before it knows the core its message goes to.
var bodies bufPool

// BodyBuffer returns an empty pooled buffer with room for a body of n
// bytes, to serialize a body into and hand to SendFor with it, or nil when
// n is beyond the pool's largest buffer (maxBodyBuffer: such a body is not
// pooled). PutBodyBuffer gives back one that SendFor did not get. Both are
// safe from any goroutine.
func BodyBuffer(n int) *[]byte {
	if n > maxBodyBuffer {
		return nil
	}
	return bodies.get(n)
}

// PutBodyBuffer gives back a buffer of BodyBuffer's that was not handed to
// SendFor (nil: none). One that grew beyond maxBodyBuffer is left to the
// collector.
func PutBodyBuffer(buf *[]byte) { bodies.put(buf) }
