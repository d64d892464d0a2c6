package dissect

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/gopacket/pcapgo"
)

// Reasons a capture file is refused; a *CaptureError wraps one of them.
var (
	ErrFormat    = errors.New("not a pcap or pcapng file")
	ErrTruncated = errors.New("capture file truncated")
	ErrCorrupt   = errors.New("capture file corrupt")
)

// CaptureError is a capture file that cannot be read (further). Offset is
// the byte offset in the (decompressed) file where the problem was found,
// Record the number of records read before it.
type CaptureError struct {
	Offset int64
	Record int
	Err    error
	Detail string
}

func (e *CaptureError) Error() string {
	s := fmt.Sprintf("raet: capture: at byte %d (after record %d): %v", e.Offset, e.Record, e.Err)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns the reason.
func (e *CaptureError) Unwrap() error { return e.Err }

func corrupt(at int64, reason error, format string, args ...any) *CaptureError {
	return &CaptureError{Offset: at, Err: reason, Detail: fmt.Sprintf(format, args...)}
}

// Record is one frame of a capture.
type Record struct {
	Time     time.Time
	LinkType int    // the LINKTYPE_ value of the frame's interface
	Data     []byte // the captured bytes; valid until the next read
	Length   int    // the frame's length on the wire (>= len(Data))
}

// CaptureReader reads the frames of a pcap or pcapng file (either may be
// gzip-compressed) with gopacket's pure-Go pcapgo readers. Bad input never
// panics and never makes it allocate more than MaxCaptureLength per frame:
// Next returns a *CaptureError for a truncated or corrupt file and io.EOF at
// its end. A CaptureReader is not safe for concurrent use.
type CaptureReader struct {
	format   string
	pcap     *pcapgo.Reader
	ng       *pcapgo.NgReader
	guard    *ngGuard
	count    *countingReader
	linkType int
	n        int
	pos      int64 // pcap: offset of the next record
	err      error
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// pcap magic numbers, as the first four bytes read little endian.
const (
	pcapMicroLE = 0xa1b2c3d4
	pcapMicroBE = 0xd4c3b2a1
	pcapNanoLE  = 0xa1b23c4d
	pcapNanoBE  = 0x4d3cb2a1
)

// NewCaptureReader detects the format of r (pcap, pcapng, either gzipped)
// and reads its file header.
func NewCaptureReader(r io.Reader) (*CaptureReader, error) {
	br := bufio.NewReaderSize(r, 16<<10)
	magic, err := br.Peek(4)
	if err != nil {
		if len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b {
			err = nil
		} else {
			return nil, &CaptureError{Err: ErrFormat, Detail: fmt.Sprintf("%d bytes", len(magic))}
		}
	}
	if magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, &CaptureError{Err: ErrFormat, Detail: "gzip: " + err.Error()}
		}
		br = bufio.NewReaderSize(zr, 16<<10)
		if magic, err = br.Peek(4); err != nil {
			return nil, &CaptureError{Err: ErrFormat, Detail: "gzip: " + err.Error()}
		}
	}
	c := &CaptureReader{}
	switch binary.LittleEndian.Uint32(magic) {
	case ngSHB:
		c.format = "pcapng"
		c.count = &countingReader{r: br}
		c.guard = newNgGuard(c.count)
		c.ng, err = pcapgo.NewNgReader(c.guard, pcapgo.NgReaderOptions{WantMixedLinkType: true})
		if err != nil {
			return nil, c.wrap(err)
		}
	case pcapMicroLE, pcapMicroBE, pcapNanoLE, pcapNanoBE:
		c.format = "pcap"
		hdr, err := br.Peek(24)
		if err != nil {
			return nil, &CaptureError{Err: ErrTruncated, Detail: "pcap file header"}
		}
		var bo binary.ByteOrder = binary.LittleEndian
		if m := binary.LittleEndian.Uint32(hdr); m == pcapMicroBE || m == pcapNanoBE {
			bo = binary.BigEndian
		}
		// The link type is the low 16 bits; pcapgo keeps only 8 of them.
		c.linkType = int(bo.Uint32(hdr[20:24]) & 0xffff)
		c.count = &countingReader{r: br}
		c.pos = 24
		if c.pcap, err = pcapgo.NewReader(c.count); err != nil {
			return nil, &CaptureError{Err: ErrCorrupt, Detail: err.Error()}
		}
		// pcapgo allocates a buffer of the snap length; it also refuses
		// frames longer than it, so 0 (unknown) must become the limit.
		if s := c.pcap.Snaplen(); s == 0 || s > MaxCaptureLength {
			c.pcap.SetSnaplen(MaxCaptureLength)
		}
	default:
		return nil, &CaptureError{Err: ErrFormat, Detail: fmt.Sprintf("magic %x", magic)}
	}
	return c, nil
}

// Format returns "pcap" or "pcapng".
func (c *CaptureReader) Format() string { return c.format }

// LinkType returns the link type of a pcap file; a pcapng file gives each
// Record its interface's.
func (c *CaptureReader) LinkType() int { return c.linkType }

// Records returns the number of records read so far.
func (c *CaptureReader) Records() int { return c.n }

// Next returns the next frame. The record's Data is valid until the next
// call. At the end of the file it returns io.EOF; for a truncated or corrupt
// file a *CaptureError, after which it keeps returning that error.
func (c *CaptureReader) Next() (Record, error) {
	if c.err != nil {
		return Record{}, c.err
	}
	var rec Record
	var err error
	if c.ng != nil {
		data, info, rerr := c.ng.ZeroCopyReadPacketData()
		err = rerr
		if err == nil {
			link, ok := c.guard.nextLink()
			if !ok {
				err = corrupt(c.count.n, ErrCorrupt, "packet without a checked block")
			}
			rec = Record{Time: info.Timestamp, LinkType: link, Data: data, Length: info.Length}
		}
	} else {
		data, info, rerr := c.pcap.ZeroCopyReadPacketData()
		err = rerr
		if err == nil {
			rec = Record{Time: info.Timestamp, LinkType: c.linkType, Data: data, Length: info.Length}
			c.pos += 16 + int64(len(data))
		}
	}
	if err != nil {
		c.err = c.wrap(err)
		return Record{}, c.err
	}
	if rec.Length < len(rec.Data) {
		rec.Length = len(rec.Data)
	}
	c.n++
	return rec, nil
}

// wrap turns a reader error into io.EOF or a *CaptureError.
func (c *CaptureReader) wrap(err error) error {
	var ce *CaptureError
	at := c.count.n
	if c.pcap != nil {
		at = c.pos
	}
	switch {
	case err == io.EOF:
		return io.EOF
	case errors.As(err, &ce):
		out := *ce
		out.Record = c.n
		return &out
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &CaptureError{Offset: at, Record: c.n, Err: ErrTruncated, Detail: "record cut short"}
	}
	return &CaptureError{Offset: at, Record: c.n, Err: ErrCorrupt, Detail: err.Error()}
}
