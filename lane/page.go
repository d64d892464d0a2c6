package lane

import (
	"fmt"

	"github.com/raet-go/raet/codec"
	codeclane "github.com/raet-go/raet/codec/lane"
	"github.com/raet-go/raet/packet"
)

// A page is a head (codec/lane) and a section of the serialized body:
//
//	ri RAET\n vn 0\n pk 0\n sn <source>\n dn <destination>\n
//	si <18 hex>\n bi <hex>\n pn <4 hex>\n pc <4 hex>\n \n <section>
//
// A page is at most MaxPageSize bytes. A body that does not fit one page
// with its head is cut, as the reference cuts it, into sections of
// MaxPageSize - (head length + pageSlack) bytes, the last one shorter; pn
// and pc have a fixed width, so every page of a book has the same head
// length.
const (
	// MaxPageSize is the largest page, head and section: 65535 bytes.
	MaxPageSize = codeclane.MaxPageSize
	// MaxPages is the largest page count.
	MaxPages = 0xffff
	// pageSlack is what the reference keeps free in a full page beyond the
	// head ("extrasize"): full pages are MaxPageSize-2 bytes long.
	pageSlack = 2
)

// paginate returns the section size and page count of a body of bodyLen
// bytes under a head of headLen bytes, for pages of at most maxPage bytes.
// A body that fits whole gives one page with the whole body.
func paginate(headLen, bodyLen, maxPage int) (section, count int, err error) {
	if headLen+bodyLen <= maxPage {
		return bodyLen, 1, nil
	}
	section = maxPage - (headLen + pageSlack)
	if section <= 0 {
		return 0, 0, fmt.Errorf("%w: a page head of %d bytes leaves no room for the body", ErrTooLarge, headLen)
	}
	count = (bodyLen + section - 1) / section
	if count > MaxPages {
		return 0, 0, fmt.Errorf("%w: %d bytes need %d pages, more than %d", ErrTooLarge, bodyLen, count, MaxPages)
	}
	return section, count, nil
}

// appendBook appends the pages of body under head h (whose PageNumber and
// PageCount it sets) to pages, for pages of at most maxPage bytes. It is
// the encoder used by tests and fuzzing; Send writes the same pages without
// keeping them.
func appendBook(pages [][]byte, h *codeclane.Head, body []byte, maxPage int) ([][]byte, error) {
	h.PageNumber, h.PageCount = 0, 1
	head, err := codeclane.Append(nil, h)
	if err != nil {
		return pages, err
	}
	section, count, err := paginate(len(head), len(body), maxPage)
	if err != nil {
		return pages, err
	}
	for i := range count {
		h.PageNumber, h.PageCount = uint16(i), uint16(count)
		p, err := codeclane.Append(nil, h)
		if err != nil {
			return pages, err
		}
		pages = append(pages, append(p, body[i*section:min((i+1)*section, len(body))]...))
	}
	return pages, nil
}

// serializer returns the body serializer of a lane pack kind (the lane's
// pack kinds are numbered apart from the road's body kinds), or nil.
func serializer(pk codec.PackKind) packet.Serializer {
	switch pk {
	case codec.PackKindJSON:
		return packet.JSONBody{}
	case codec.PackKindPack:
		return packet.MsgpackBody{}
	case codec.PackKindCBOR:
		return packet.CBORBody{}
	}
	return nil
}
