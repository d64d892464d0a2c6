package gen

import "github.com/raet-go/raet/spec"

// ProtocolPath is where emitProtocol writes package protocol: the spec's
// values that no head field has (the keep's, the bus's) and the default
// port.
const ProtocolPath = "protocol/protocol_gen.go"

const protocolImport = Module + "/protocol"

// enumImport is the import path of the package that declares e: codec for
// the enumerations of head fields, protocol for the others.
func (g *generator) enumImport(e *spec.Enum) string {
	if g.s.HeadEnum(e) {
		return codecImport
	}
	return protocolImport
}

// otherEnums are the enumerations of package protocol.
func (g *generator) otherEnums() []*spec.Enum {
	var out []*spec.Enum
	for _, e := range g.s.Enums {
		if !g.s.HeadEnum(e) {
			out = append(out, e)
		}
	}
	return out
}

// emitProtocol writes package protocol, with its package doc: a package of
// constants that depends on nothing, so that a file format (the keep) or a
// pattern layer (the bus) names its values without depending on the packet
// heads' package.
func (g *generator) emitProtocol() error {
	enums := g.otherEnums()
	doc := []string{
		"Package protocol holds the values the RAET specification (" + g.source + ")",
		"declares beyond the packet heads: RAET's UDP port (DefaultPort) and the",
		"enumerations that no head field has:",
		"",
	}
	for _, e := range enums {
		doc = append(doc, "  - "+e.Name+": "+e.Doc)
	}
	doc = append(doc, "",
		"The enumerations of head fields are in package codec. Everything here is",
		"generated: edit the specification and run go run ./cmd/raetgen -w.")
	f := g.newFile(ProtocolPath, "protocol")
	f.Doc(doc...)
	f.P("// DefaultPort is RAET's UDP port (RAET_PORT of the reference): where a road")
	f.P("// estate listens unless told otherwise, and where a dissector looks for")
	f.P("// road packets.")
	f.Pf("const DefaultPort = %d", g.s.DefaultPort)
	f.P()
	for _, e := range enums {
		g.emitEnum(f, e)
	}
	return g.add(f)
}
