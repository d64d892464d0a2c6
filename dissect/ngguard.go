package dissect

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// pcapng block types (draft-ietf-opsawg-pcapng).
const (
	ngSHB = 0x0A0D0D0A // section header
	ngIDB = 0x00000001 // interface description
	ngOPB = 0x00000002 // packet (obsolete)
	ngSPB = 0x00000003 // simple packet
	ngISB = 0x00000005 // interface statistics
	ngEPB = 0x00000006 // enhanced packet

	ngByteOrderMagic = 0x1A2B3C4D
)

// Limits of the pcapng guard.
const (
	// MaxCaptureLength is the largest captured frame read from a file;
	// larger ones are refused as corrupt. tcpdump's limit is 262144.
	MaxCaptureLength = 1 << 20
	maxMetaBlock     = 64 << 10  // SHB, IDB and ISB are read whole
	maxPacketBlock   = 16 << 20  // EPB, SPB, OPB
	maxOtherBlock    = 256 << 20 // other blocks are skipped unread
)

// ngGuard sits between a pcapng file and pcapgo.NgReader and passes a block
// on only once its framing has been checked: block lengths, the
// interface a packet names, captured lengths within their block, and the
// options pcapgo indexes without checking their length. pcapgo v1.1.19
// panics or allocates without bound on such input (an if_tsresol of 64 or
// more divides by zero, a short if_filter, if_tsoffset or statistics option
// is indexed out of range, a huge caplen or snaplen is allocated whole), so
// the guard turns those into a *CaptureError before pcapgo sees them. It
// also clamps each interface's snaplen to MaxCaptureLength, since pcapgo
// allocates a buffer of that size, and it records the link type of every
// packet block in order: pcapgo reports link types as uint8, which loses
// values such as LINKTYPE_LINUX_SLL2 (276).
type ngGuard struct {
	r      io.Reader
	off    int64 // offset in the file of the next byte read from r
	out    []byte
	outPos int
	pass   int64 // bytes of the current block passed on unchecked
	passAt int64 // offset of the block being passed on, for errors
	err    error

	bo      binary.ByteOrder
	section bool
	ifaces  []ngIface
	links   []int // link types of the packet blocks passed on, in order
	head    int   // links[head:] are not consumed yet
	buf     []byte
	hdr     [12]byte
}

type ngIface struct {
	link    int
	snaplen uint32
}

func newNgGuard(r io.Reader) *ngGuard { return &ngGuard{r: r, bo: binary.LittleEndian} }

// nextLink returns the link type of the next packet pcapgo returns.
func (g *ngGuard) nextLink() (int, bool) {
	if g.head >= len(g.links) {
		return 0, false
	}
	l := g.links[g.head]
	g.head++
	if g.head == len(g.links) {
		g.links, g.head = g.links[:0], 0
	}
	return l, true
}

func (g *ngGuard) Read(p []byte) (int, error) {
	for {
		if g.outPos < len(g.out) {
			n := copy(p, g.out[g.outPos:])
			g.outPos += n
			return n, nil
		}
		if g.pass > 0 {
			if int64(len(p)) > g.pass {
				p = p[:g.pass]
			}
			n, err := g.r.Read(p)
			g.pass -= int64(n)
			g.off += int64(n)
			if n > 0 {
				return n, nil
			}
			if err == io.EOF || err == nil {
				g.err = corrupt(g.passAt, ErrTruncated, "block cut short at byte %d", g.off)
				return 0, g.err
			}
			g.err = &CaptureError{Offset: g.off, Err: err}
			return 0, g.err
		}
		if g.err != nil {
			return 0, g.err
		}
		if err := g.nextBlock(); err != nil {
			g.err = err
			return 0, err
		}
	}
}

// readFull reads exactly len(b) bytes; at is the offset of the block.
func (g *ngGuard) readFull(b []byte, at int64, atStart bool) error {
	n, err := io.ReadFull(g.r, b)
	g.off += int64(n)
	switch {
	case err == nil:
		return nil
	case err == io.EOF && atStart:
		return io.EOF
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return corrupt(at, ErrTruncated, "block cut short at byte %d", g.off)
	}
	return &CaptureError{Offset: g.off, Err: err}
}

func (g *ngGuard) nextBlock() error {
	at := g.off
	g.out, g.outPos = g.buf[:0], 0
	hdr := g.hdr[:]
	if err := g.readFull(hdr[:8], at, true); err != nil {
		return err
	}
	typ := binary.LittleEndian.Uint32(hdr[:4]) // SHB's type reads the same both ways
	if typ == ngSHB {
		if err := g.readFull(hdr[8:12], at, false); err != nil {
			return err
		}
		switch {
		case binary.BigEndian.Uint32(hdr[8:12]) == ngByteOrderMagic:
			g.bo = binary.BigEndian
		case binary.LittleEndian.Uint32(hdr[8:12]) == ngByteOrderMagic:
			g.bo = binary.LittleEndian
		default:
			return corrupt(at, ErrCorrupt, "section header with a bad byte-order magic")
		}
	} else {
		typ = g.bo.Uint32(hdr[:4])
		if !g.section {
			return corrupt(at, ErrCorrupt, "block of type %#x before the first section header", typ)
		}
	}
	length := g.bo.Uint32(hdr[4:8])
	if length < 12 || length%4 != 0 {
		return corrupt(at, ErrCorrupt, "block of type %#x with a length of %d", typ, length)
	}
	switch typ {
	case ngSHB, ngIDB, ngISB:
		if length > maxMetaBlock || (typ == ngSHB && length < 28) || (typ == ngIDB && length < 20) || (typ == ngISB && length < 24) {
			return corrupt(at, ErrCorrupt, "block of type %#x with a length of %d", typ, length)
		}
		blk := g.grow(int(length))
		hn := 8
		if typ == ngSHB {
			hn = 12
		}
		copy(blk, hdr[:hn])
		if err := g.readFull(blk[hn:], at, false); err != nil {
			return err
		}
		if g.bo.Uint32(blk[length-4:]) != length {
			return corrupt(at, ErrCorrupt, "block of type %#x: trailing length differs", typ)
		}
		var err error
		switch typ {
		case ngSHB:
			err = g.checkSHB(blk, at)
		case ngIDB:
			err = g.checkIDB(blk, at)
		default:
			err = g.checkISB(blk, at)
		}
		if err != nil {
			return err
		}
		g.out = blk
		return nil
	case ngEPB, ngOPB:
		if length > maxPacketBlock || length < 32 {
			return corrupt(at, ErrCorrupt, "packet block with a length of %d", length)
		}
		blk := g.grow(28)
		copy(blk, hdr[:8])
		if err := g.readFull(blk[8:28], at, false); err != nil {
			return err
		}
		var ifid int
		if typ == ngEPB {
			ifid = int(g.bo.Uint32(blk[8:12]))
		} else {
			ifid = int(g.bo.Uint16(blk[8:10]))
		}
		caplen := g.bo.Uint32(blk[20:24])
		if ifid >= len(g.ifaces) {
			return corrupt(at, ErrCorrupt, "packet of interface %d; the section has %d", ifid, len(g.ifaces))
		}
		if caplen > length-32 || caplen > MaxCaptureLength {
			return corrupt(at, ErrCorrupt, "packet of %d captured bytes in a block of %d", caplen, length)
		}
		g.links = append(g.links, g.ifaces[ifid].link)
		g.out, g.pass, g.passAt = blk, int64(length)-28, at
		return nil
	case ngSPB:
		if length > maxPacketBlock || length < 16 {
			return corrupt(at, ErrCorrupt, "simple packet block with a length of %d", length)
		}
		blk := g.grow(12)
		copy(blk, hdr[:8])
		if err := g.readFull(blk[8:12], at, false); err != nil {
			return err
		}
		if len(g.ifaces) == 0 {
			return corrupt(at, ErrCorrupt, "simple packet block before any interface")
		}
		caplen := g.bo.Uint32(blk[8:12])
		if s := g.ifaces[0].snaplen; s != 0 && caplen > s {
			caplen = s
		}
		if caplen > length-16 || caplen > MaxCaptureLength {
			return corrupt(at, ErrCorrupt, "simple packet of %d bytes in a block of %d", caplen, length)
		}
		g.links = append(g.links, g.ifaces[0].link)
		g.out, g.pass, g.passAt = blk, int64(length)-12, at
		return nil
	}
	if length > maxOtherBlock {
		return corrupt(at, ErrCorrupt, "block of type %#x with a length of %d", typ, length)
	}
	g.out = append(g.grow(0), hdr[:8]...)
	g.pass, g.passAt = int64(length)-8, at
	return nil
}

func (g *ngGuard) grow(n int) []byte {
	if cap(g.buf) < n {
		g.buf = make([]byte, n)
	}
	return g.buf[:n]
}

func (g *ngGuard) checkSHB(blk []byte, at int64) error {
	if g.bo.Uint16(blk[12:14]) != 1 || g.bo.Uint16(blk[14:16]) != 0 {
		return corrupt(at, ErrCorrupt, "section header of pcapng version %d.%d, not 1.0",
			g.bo.Uint16(blk[12:14]), g.bo.Uint16(blk[14:16]))
	}
	if err := g.checkOptions(blk, 24, at, nil); err != nil {
		return err
	}
	g.section = true
	g.ifaces = g.ifaces[:0]
	return nil
}

func (g *ngGuard) checkIDB(blk []byte, at int64) error {
	iface := ngIface{link: int(g.bo.Uint16(blk[8:10])), snaplen: g.bo.Uint32(blk[12:16])}
	err := g.checkOptions(blk, 16, at, func(code uint16, v []byte) error {
		switch code {
		case 9: // if_tsresol
			if len(v) < 1 {
				return errors.New("empty if_tsresol")
			}
			e := v[0] & 0x7f
			if (v[0]&0x80 != 0 && e > 63) || (v[0]&0x80 == 0 && e > 19) {
				return fmt.Errorf("if_tsresol %#x out of range", v[0])
			}
		case 11: // if_filter
			if len(v) < 1 {
				return errors.New("empty if_filter")
			}
		case 14: // if_tsoffset
			if len(v) < 8 {
				return errors.New("short if_tsoffset")
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if iface.snaplen > MaxCaptureLength {
		iface.snaplen = MaxCaptureLength
		g.bo.PutUint32(blk[12:16], MaxCaptureLength)
	}
	g.ifaces = append(g.ifaces, iface)
	return nil
}

func (g *ngGuard) checkISB(blk []byte, at int64) error {
	if id := g.bo.Uint32(blk[8:12]); int64(id) >= int64(len(g.ifaces)) {
		return corrupt(at, ErrCorrupt, "statistics of interface %d; the section has %d", id, len(g.ifaces))
	}
	return g.checkOptions(blk, 20, at, func(code uint16, v []byte) error {
		if code >= 2 && code <= 5 && len(v) < 8 { // start and end time, received, dropped
			return fmt.Errorf("short statistics option %d", code)
		}
		return nil
	})
}

// checkOptions walks the options of blk from offset start to its trailing
// length, as pcapgo reads them: they must end at the trailer or with an
// empty end-of-options option.
func (g *ngGuard) checkOptions(blk []byte, start int, at int64, check func(code uint16, v []byte) error) error {
	end := len(blk) - 4
	pos := start
	for pos < end {
		if end-pos < 4 {
			return corrupt(at, ErrCorrupt, "option header cut by the end of the block")
		}
		code, n := g.bo.Uint16(blk[pos:]), int(g.bo.Uint16(blk[pos+2:]))
		pos += 4
		if code == 0 {
			if n != 0 {
				return corrupt(at, ErrCorrupt, "end-of-options option with a length of %d", n)
			}
			return nil
		}
		padded := (n + 3) &^ 3
		if padded > end-pos {
			return corrupt(at, ErrCorrupt, "option %d of %d bytes overruns its block", code, n)
		}
		if check != nil {
			if err := check(code, blk[pos:pos+n]); err != nil {
				return corrupt(at, ErrCorrupt, "%v", err)
			}
		}
		pos += padded
	}
	return nil
}
