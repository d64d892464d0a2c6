package gen

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/raet-go/raet/spec"
)

// LuaPath is where emitLua writes the Wireshark dissector. It sits beside
// docs/wire.md, the other generated reference of the wire format (and a
// directory gen's own check-gen test copies).
const LuaPath = "docs/wireshark/raet.lua"

// Constants of the Lua dissector that are not in the spec: raet-go's lane
// capture record (see
// package dissect: lane pages are written with link type LINKTYPE_USER0 in
// a record that starts with this magic and version, then flags, the two
// socket path lengths and the paths).
const (
	luaLaneMagic    = "RLAN"
	luaLaneVersion  = 1
	luaLaneFlagOut  = 1
	luaLaneHeadSize = 10
)

// emitLua writes docs/wireshark/raet.lua, a Wireshark Lua dissector for the road
// packet (all three head kinds) and the lane page. The spec gives the
// tables (fields, their encodings, enumerations, flags, framing, limits);
// the parsing logic, one function per head kind, reads them.
func (g *generator) emitLua() error {
	s := g.s
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("-- %s from %s. DO NOT EDIT.", Marker[3:], g.source)
	p("-- raetgen %s: a Wireshark dissector for RAET (Reliable Asynchronous Event Transport).", Version)
	p("--")
	p("-- Use it with tshark or Wireshark 4.0 or later:")
	p("--   tshark -X lua_script:%s -r capture.pcapng", LuaPath)
	p("--   or copy it to ~/.local/lib/wireshark/plugins/")
	p("--")
	p("-- Road packets are dissected on UDP port %d and, by heuristic, in any UDP", s.DefaultPort)
	p("-- datagram that starts like a RAET head (native, JSON or binary). Lane pages are")
	p("-- dissected in raet-go's lane capture records (link type USER0, written by")
	p("-- package dissect). Fields are raet.<key> for the road head (enumerations shown")
	p("-- by name, fields at their default generated), raet.coat, raet.foot and raet.error;")
	p("-- raet_lane.<key> for the lane page head, raet_lane.src, raet_lane.dst,")
	p("-- raet_lane.out, raet_lane.body and raet_lane.error.")
	p("")
	p("local raet = Proto(\"raet\", \"RAET road packet\")")
	p("local raet_lane = Proto(\"raet_lane\", \"RAET lane page\")")
	p("")
	p("local MAX_HEAD_SIZE = %d", s.Limits.MaxHeadSize)
	p("local DEFAULT_PORT = %d", s.DefaultPort)
	nh, jh, bh := s.Heads.Native, s.Heads.JSON, s.Heads.Binary
	p("local NATIVE = { prefix = %s, separator = %s, terminator = %s, kind = %d }",
		luaQuote(nh.Prefix), luaQuote(nh.Separator), luaQuote(nh.Terminator), headKindValue(s, nh.Kind))
	p("local JSONH = { prefix = %s, terminator = %s, kind = %d }", luaQuote(jh.Prefix), luaQuote(jh.Terminator), headKindValue(s, jh.Kind))
	p("local BINARY = { magic = %d, version = %d, magic_offset = %d, version_offset = %d, bitmap_offset = %d, bitmap_bytes = %d, kind = %d }",
		bh.Magic, bh.Version, bh.MagicOffset, bh.VersionOffset, bh.BitmapOffset, s.BitmapBytes(), headKindValue(s, bh.Kind))
	p("local LANE = { prefix = %s, terminator = %s, max_page = %d, magic = %s, version = %d, flag_out = %d, record_head = %d }",
		luaQuote(s.Lane.Prefix), luaQuote(s.Lane.Terminator), s.Lane.MaxPageSize, luaQuote(luaLaneMagic), luaLaneVersion, luaLaneFlagOut, luaLaneHeadSize)
	p("")
	p("-- Enumerations: value -> name.")
	p("local ENUMS = {")
	for _, e := range s.Enums {
		var vals []string
		for _, v := range e.Values {
			vals = append(vals, fmt.Sprintf("[%d] = %s", v.Value, luaQuote(v.Name)))
		}
		p("  %s = { %s },", e.Name, strings.Join(vals, ", "))
	}
	p("}")
	p("")
	p("-- The flags of %s, most significant bit first.", s.Flags.Key)
	p("local FLAGS_KEY = %s", luaQuote(s.Flags.Key))
	p("local FLAGS = {")
	for _, k := range s.Flags.Order {
		for _, fb := range s.Flags.Bits {
			if fb.Key == k {
				p("  { key = %s, mask = %d, doc = %s },", luaQuote(fb.Key), fb.Mask, luaQuote(fb.Doc))
			}
		}
	}
	p("}")
	p("")
	p("-- Head fields in emission order. kind: str, uint, float, flags; native and json:")
	p("-- the value formats; *_always: always present; fixed = {offset, width} and benc")
	p("-- (u8, uvarint, f64) with bit: the binary head.")
	p("local FIELDS = {")
	for _, f := range s.Fields {
		p("  { %s },", strings.Join(luaField(f), ", "))
	}
	p("}")
	p("local RESERVED = { %s }", luaKeySet(s.ReservedKeys))
	p("")
	p("-- Lane page head fields, all always present, in order.")
	p("local LANE_FIELDS = {")
	for _, f := range s.Lane.Fields {
		parts := []string{"key = " + luaQuote(f.Key), "doc = " + luaQuote(f.Doc), "format = " + luaQuote(f.Format),
			fmt.Sprintf("width = %d", f.Width)}
		switch {
		case f.Type == spec.TypeStr:
			parts = append(parts, `kind = "str"`, "default = "+luaQuote(f.Value.Str))
		default:
			parts = append(parts, `kind = "uint"`, fmt.Sprintf("bits = %d", f.Type.Bits()), fmt.Sprintf("default = %d", f.Value.Uint))
		}
		if f.Enum != nil {
			parts = append(parts, "enum = "+luaQuote(f.Enum.Name))
		}
		p("  { %s },", strings.Join(parts, ", "))
	}
	p("}")
	p("")
	p("-- Bus envelope fields (keys of a JSON body whose first key is %s), in order.", luaQuote(s.Envelope.Fields[0].Key))
	p("local BUS_FIELDS = {")
	for _, f := range s.Envelope.Fields {
		parts := []string{"key = " + luaQuote(f.Key), "doc = " + luaQuote(f.Doc), "type = " + luaQuote(f.TypeName)}
		if f.Enum != nil {
			parts = append(parts, "enum = "+luaQuote(f.Enum.Name))
		}
		p("  { %s },", strings.Join(parts, ", "))
	}
	p("}")
	b.WriteString(luaBody)
	g.files = append(g.files, File{Path: LuaPath, Content: b.Bytes()})
	return nil
}

func headKindValue(s *spec.Spec, name string) uint64 {
	if v := s.Enum("HeadKind").Lookup(name); v != nil {
		return v.Value
	}
	return 255
}

// luaField is the Lua table entries describing one head field.
func luaField(f *spec.Field) []string {
	parts := []string{"key = " + luaQuote(f.Key), "doc = " + luaQuote(f.Doc)}
	switch f.Type {
	case spec.TypeStr:
		parts = append(parts, `kind = "str"`, "default = "+luaQuote(f.Value.Str))
	case spec.TypeF64:
		parts = append(parts, `kind = "float"`, "default = "+strconv.FormatFloat(f.Value.Float, 'g', -1, 64))
	case spec.TypeFlags:
		parts = append(parts, `kind = "flags"`, "bits = 8", fmt.Sprintf("default = %d", f.Value.Uint))
	default:
		parts = append(parts, `kind = "uint"`, fmt.Sprintf("bits = %d", f.Type.Bits()), fmt.Sprintf("default = %d", f.Value.Uint))
	}
	if f.Enum != nil {
		parts = append(parts, "enum = "+luaQuote(f.Enum.Name))
	}
	parts = append(parts, "native = "+luaQuote(presenceFormat(f.Native)), fmt.Sprintf("native_width = %d", f.Native.Width),
		fmt.Sprintf("native_always = %t", presence(f.Native) == spec.Always),
		"json = "+luaQuote(presenceFormat(f.JSON)), fmt.Sprintf("json_always = %t", presence(f.JSON) == spec.Always))
	switch {
	case f.Binary.Presence == spec.Never:
	case f.Binary.Fixed():
		parts = append(parts, fmt.Sprintf("fixed = { %d, %d }", *f.Binary.Offset, f.Binary.Width))
	default:
		parts = append(parts, "benc = "+luaQuote(f.Binary.Encoding), fmt.Sprintf("bit = %d", f.Bit))
	}
	if len(f.Accept) > 0 {
		var acc []string
		for _, a := range f.Accept {
			acc = append(acc, fmt.Sprintf("[%d] = true", a))
		}
		parts = append(parts, "accept = { "+strings.Join(acc, ", ")+" }")
	}
	return parts
}

// presenceFormat is an encoding's format, or "never".
func presenceFormat(e spec.Encoding) string {
	if presence(e) == spec.Never {
		return "never"
	}
	return e.Format
}

func luaKeySet(keys []string) string {
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("[%s] = true", luaQuote(k)))
	}
	return strings.Join(out, ", ")
}

// luaQuote quotes s as a Lua string literal (ASCII; other bytes as \ddd).
func luaQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, `\%03d`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// luaBody is the dissector's logic; it reads the tables above.
const luaBody = `
local BY_KEY, INDEX = {}, {}
for i, f in ipairs(FIELDS) do
  BY_KEY[f.key], INDEX[f.key] = f, i
end
local BITMAP = {}
for _, f in ipairs(FIELDS) do
  if f.bit then BITMAP[#BITMAP + 1] = f end
end
table.sort(BITMAP, function(a, b) return a.bit < b.bit end)

-- ProtoFields: raet.<key>, then the flags, coat, foot and error.
local PF = {}
local function uint_field(abbr, name, bits, enum, hex)
  local ctor = ({ [8] = ProtoField.uint8, [16] = ProtoField.uint16, [32] = ProtoField.uint32, [64] = ProtoField.uint64 })[bits]
  return ctor(abbr, name, hex and base.HEX or base.DEC, enum and ENUMS[enum] or nil)
end
local list = {}
for _, f in ipairs(FIELDS) do
  local abbr, name = "raet." .. f.key, f.key .. " (" .. f.doc .. ")"
  if f.kind == "str" then
    PF[f.key] = ProtoField.string(abbr, name)
  elseif f.kind == "float" then
    PF[f.key] = ProtoField.double(abbr, name)
  else
    PF[f.key] = uint_field(abbr, name, f.bits, f.enum, f.kind == "flags")
  end
  list[#list + 1] = PF[f.key]
end
for _, fl in ipairs(FLAGS) do
  PF[fl.key] = ProtoField.bool("raet." .. fl.key, fl.key .. " (" .. fl.doc .. ")")
  list[#list + 1] = PF[fl.key]
end
PF.coat = ProtoField.bytes("raet.coat", "coat (the body, maybe encrypted)")
PF.foot = ProtoField.bytes("raet.foot", "foot (the signature)")
PF.error = ProtoField.string("raet.error", "error")
list[#list + 1], list[#list + 2], list[#list + 3] = PF.coat, PF.foot, PF.error

-- Bundles and answers (raet-go extensions): their tables are in the clear
-- coat. The limits are package packet's MaxBundleEntries, MaxAnswerRanges
-- and MaxAnswerIDs.
local PK = {}
for v, name in pairs(ENUMS.PacketKind) do PK[name] = v end
local MAX_ENTRIES, MAX_RANGES, MAX_IDS = 255, 256, 8192
PF.entry = ProtoField.bytes("raet.bundle.entry", "bundled message")
PF.e_ti = ProtoField.uint32("raet.bundle.ti", "ti of a bundled message")
PF.e_fg = ProtoField.uint8("raet.bundle.fg", "flags of a bundled message", base.HEX)
PF.e_bk = ProtoField.uint8("raet.bundle.bk", "body kind of a bundled message", base.DEC, ENUMS.BodyKind)
PF.e_len = ProtoField.uint32("raet.bundle.len", "plaintext length of a bundled message")
PF.range = ProtoField.bytes("raet.answers.range", "answered transactions")
PF.a_pk = ProtoField.uint8("raet.answers.pk", "answer kind", base.DEC, ENUMS.PacketKind)
PF.a_first = ProtoField.uint32("raet.answers.first", "first answered ti")
PF.a_count = ProtoField.uint32("raet.answers.count", "answered transactions in the range")
PF.b_error = ProtoField.string("raet.bundle.error", "bundle or answers error")
for _, k in ipairs({ "entry", "e_ti", "e_fg", "e_bk", "e_len", "range", "a_pk", "a_first", "a_count", "b_error" }) do
  list[#list + 1] = PF[k]
end
raet.fields = list

-- read_uvarint reads a minimal uvarint at pos before stop: value, next pos.
local function read_uvarint(tvb, pos, stop)
  local v, shift = 0, 0
  for i = 0, 9 do
    if pos + i >= stop then return nil end
    local c = tvb(pos + i, 1):uint()
    v = v + (c % 128) * 2 ^ shift
    shift = shift + 7
    if c < 128 then
      if c == 0 and i > 0 then return nil end
      return v, pos + i + 1
    end
  end
  return nil
end

-- dissect_answers adds the ranges of an answers list; it returns an error or nil.
local function dissect_answers(tvb, tree, pos, stop)
  local n
  n, pos = read_uvarint(tvb, pos, stop)
  if not n or n == 0 or n > MAX_RANGES then return "answers: range count" end
  local last, ids = 0, 0
  for _ = 1, n do
    if pos >= stop then return "answers: truncated" end
    local start, kind = pos, tvb(pos, 1):uint()
    if kind ~= PK.ack and kind ~= PK.done then return "answers: kind" end
    local z, c
    z, pos = read_uvarint(tvb, pos + 1, stop)
    if not z or z > 4294967295 then return "answers: first" end
    c, pos = read_uvarint(tvb, pos, stop)
    if not c or c >= MAX_IDS then return "answers: count" end
    ids = ids + c + 1
    if ids > MAX_IDS then return "answers: too many ids" end
    local d = math.floor(z / 2)
    if z % 2 == 1 then d = -d - 1 end
    local first = (last + d) % 4294967296
    local t = tree:add(PF.range, tvb(start, pos - start))
    t:add(PF.a_pk, tvb(start, 1), kind)
    t:add(PF.a_first, tvb(start + 1, pos - start - 1), first)
    t:add(PF.a_count, tvb(start + 1, pos - start - 1), c + 1)
    last = (first + c) % 4294967296
  end
  if pos ~= stop then return "answers: trailing bytes" end
  return nil
end

-- dissect_bundle adds a bundle's entries and answers; it returns an error or nil.
local function dissect_bundle(tvb, tree, pos, stop)
  local n
  n, pos = read_uvarint(tvb, pos, stop)
  if not n or n == 0 or n > MAX_ENTRIES then return "bundle: entry count" end
  local total = 0
  for _ = 1, n do
    local start, ti, l = pos
    ti, pos = read_uvarint(tvb, pos, stop)
    if not ti or ti > 4294967295 then return "bundle: entry ti" end
    if stop - pos < 2 then return "bundle: entry flags" end
    local fgpos = pos
    l, pos = read_uvarint(tvb, pos + 2, stop)
    if not l then return "bundle: entry length" end
    total = total + l
    if total > stop then return "bundle: entry lengths exceed the coat" end
    local t = tree:add(PF.entry, tvb(start, pos - start))
    t:add(PF.e_ti, tvb(start, fgpos - start), ti)
    t:add(PF.e_fg, tvb(fgpos, 1))
    t:add(PF.e_bk, tvb(fgpos + 1, 1))
    t:add(PF.e_len, tvb(fgpos + 2, pos - fgpos - 2), l)
  end
  local a
  a, pos = read_uvarint(tvb, pos, stop)
  if not a or a > stop - pos then return "bundle: answers length" end
  if a > 0 then return dissect_answers(tvb, tree, pos, pos + a) end
  return nil
end

local LPF, llist = {}, {}
for _, f in ipairs(LANE_FIELDS) do
  local abbr, name = "raet_lane." .. f.key, f.key .. " (" .. f.doc .. ")"
  if f.kind == "str" then
    LPF[f.key] = ProtoField.string(abbr, name)
  else
    LPF[f.key] = uint_field(abbr, name, f.bits, f.enum, false)
  end
  llist[#llist + 1] = LPF[f.key]
end
LPF.src = ProtoField.string("raet_lane.src", "source socket")
LPF.dst = ProtoField.string("raet_lane.dst", "destination socket")
LPF.out = ProtoField.bool("raet_lane.out", "sent by the capturing yard")
LPF.body = ProtoField.bytes("raet_lane.body", "body")
LPF.error = ProtoField.string("raet_lane.error", "error")
for _, k in ipairs({ "src", "dst", "out", "body", "error" }) do llist[#llist + 1] = LPF[k] end
-- The bus envelope's fields, raet_bus.<key>: enumerations by name, the
-- others as the JSON text of their value.
local BPF = {}
for _, f in ipairs(BUS_FIELDS) do
  local abbr, name = "raet_bus." .. f.key, f.key .. " (" .. f.doc .. ")"
  if f.enum then
    BPF[f.key] = ProtoField.uint8(abbr, name, base.DEC, ENUMS[f.enum])
  else
    BPF[f.key] = ProtoField.string(abbr, name)
  end
  llist[#llist + 1] = BPF[f.key]
end
BPF.error = ProtoField.string("raet_bus.error", "bus envelope error")
llist[#llist + 1] = BPF.error
raet_lane.fields = llist

-- json_end returns the index just after the JSON value that starts at i in
-- s (compact JSON, as RAET writes it), or nil.
local function json_end(s, i)
  local c = s:sub(i, i)
  if c == '"' then
    local j = i + 1
    while j <= #s do
      local d = s:sub(j, j)
      if d == "\\" then j = j + 2 elseif d == '"' then return j + 1 else j = j + 1 end
    end
    return nil
  elseif c == "{" or c == "[" then
    local depth, j = 0, i
    while j <= #s do
      local d = s:sub(j, j)
      if d == '"' then
        j = json_end(s, j)
        if not j then return nil end
      else
        if d == "{" or d == "[" then depth = depth + 1
        elseif d == "}" or d == "]" then
          depth = depth - 1
          if depth == 0 then return j + 1 end
        end
        j = j + 1
      end
    end
    return nil
  end
  return s:find("[,}%]]", i)
end

-- bus_envelope adds the bus envelope in body (a compact JSON object whose
-- first key is the version) to tree, at offset off of tvb; it returns the
-- kind's name, or nil when body is not an envelope.
local function bus_envelope(tree, tvb, off, body)
  local first = '{"' .. BUS_FIELDS[1].key .. '":'
  if body:sub(1, #first) ~= first then return nil end
  local known = {}
  for _, f in ipairs(BUS_FIELDS) do known[f.key] = f end
  local sub = tree:add(raet_lane, tvb(off, #body), "RAET bus envelope")
  local i, kind = 2, nil
  while i <= #body do
    local c = body:sub(i, i)
    if c == "}" then return kind or "?" end
    if c == "," then i = i + 1 end
    local ke = json_end(body, i)
    if not ke or body:sub(i, i) ~= '"' or body:sub(ke, ke) ~= ":" then break end
    local key = body:sub(i + 1, ke - 2)
    local ve = json_end(body, ke + 1)
    if not ve then break end
    local text = body:sub(ke + 1, ve - 1)
    local f = known[key]
    if f and f.enum then
      local v = tonumber(text)
      if not v or v < 0 or v > 255 or v ~= math.floor(v) then break end
      sub:add(BPF[key], tvb(off + ke, ve - ke - 1), v)
      if key == "ek" then kind = ENUMS[f.enum][v] or tostring(v) end
    elseif f then
      if f.type == "str" and text:sub(1, 1) == '"' then text = text:sub(2, -2) end
      sub:add(BPF[key], tvb(off + ke, ve - ke - 1), text)
    end
    i = ve
  end
  sub:add(BPF.error, "malformed bus envelope")
  return kind
end

local EXPERT = ProtoExpert.new("raet.malformed", "Malformed RAET packet", expert.group.MALFORMED, expert.severity.ERROR)
local LEXPERT = ProtoExpert.new("raet_lane.malformed", "Malformed RAET lane page", expert.group.MALFORMED, expert.severity.ERROR)
raet.experts = { EXPERT }
raet_lane.experts = { LEXPERT }

-- Value parsers. Each returns the value or nil and the reason.
local function max_of(bits) return 2 ^ bits - 1 end

local function parse_hex(s, bits)
  if s == "" or not s:match("^[0-9a-fA-F]+$") then return nil, "bad value" end
  local sig = s:gsub("^0+", "")
  if #sig > bits / 4 then return nil, "bad value" end
  local v = tonumber(s, 16)
  if v > max_of(bits) then return nil, "bad value" end
  return v
end

local function parse_float(s)
  if s == "" or not s:match("^[0-9%.eE%+%-]+$") then return nil, "bad value" end
  local v = tonumber(s)
  if not v then return nil, "bad value" end
  return v
end

local function parse_decimal(s, bits)
  if not s:match("^[0-9]+$") or (#s > 1 and s:sub(1, 1) == "0") then return nil, "bad value" end
  local v = tonumber(s)
  if v > max_of(bits) then return nil, "bad value" end
  return v
end

-- value parses one field's value text in format fmt.
local function value(f, fmt, text, quoted)
  if fmt == "str" then
    if text ~= f.default then return nil, "bad value" end
    return text
  elseif fmt == "hex" or fmt == "hexfixed" or fmt == "hexstring" then
    return parse_hex(text, f.bits)
  elseif fmt == "float6" or fmt == "float" then
    return parse_float(text)
  elseif fmt == "number" then
    return parse_decimal(text, f.bits)
  end
  return nil, "no format"
end

local function fail(at, why) return nil, why .. " at byte " .. at end

-- parse_native reads a native head from the Lua string buf.
local function parse_native(buf, n)
  if buf:sub(1, #NATIVE.prefix) ~= NATIVE.prefix then return fail(0, "not a RAET head") end
  local lim = math.min(n, MAX_HEAD_SIZE)
  local e = buf:sub(1, lim):find(NATIVE.terminator, 1, true)
  if not e then
    if n > MAX_HEAD_SIZE then return fail(MAX_HEAD_SIZE, "head too long") end
    return fail(n, "truncated head")
  end
  local vals, pos = {}, 1
  while pos < e do
    local le = buf:find(NATIVE.separator, pos, true)
    if not le or le > e then le = e end
    local line = buf:sub(pos, le - 1)
    local sp = line:find(" ", 1, true)
    if not sp or line:find(" ", sp + 1, true) then return fail(pos - 1, "syntax error") end
    local key, text = line:sub(1, sp - 1), line:sub(sp + 1)
    local f = BY_KEY[key]
    if not f then return fail(pos - 1, "unknown key " .. key) end
    if vals[key] then return fail(pos - 1, "duplicate key " .. key) end
    local fmt = f.native
    if fmt == "never" then fmt = "hex" end
    local v, why = value(f, fmt, text)
    if v == nil then return fail(pos + sp - 1, key .. ": " .. why) end
    vals[key] = { v = v, off = pos + sp - 1, len = #text }
    pos = le + #NATIVE.separator
  end
  for _, f in ipairs(FIELDS) do
    if f.native_always and not vals[f.key] then return fail(e - 1, f.key .. ": required field missing") end
  end
  return vals, e - 1 + #NATIVE.terminator, NATIVE.kind
end

-- parse_json reads a JSON head: the compact form, keys in order.
local function parse_json(buf, n)
  if buf:sub(1, #JSONH.prefix) ~= JSONH.prefix then return fail(0, "not a RAET head") end
  local p = buf:sub(1, math.min(n, MAX_HEAD_SIZE))
  local vals, last, pos = {}, 0, 2
  while true do
    if pos > #p then return fail(pos - 1, "truncated head") end
    if p:sub(pos, pos) ~= '"' then return fail(pos - 1, "syntax error") end
    local ke = p:find('"', pos + 1, true)
    if not ke then return fail(#p, "truncated head") end
    local key, keyat = p:sub(pos + 1, ke - 1), pos - 1
    pos = ke + 1
    if p:sub(pos, pos) ~= ":" then return fail(pos - 1, "syntax error") end
    pos = pos + 1
    local f = BY_KEY[key]
    if not f then return fail(keyat, "unknown key " .. key) end
    if vals[key] then return fail(keyat, "duplicate key " .. key) end
    if INDEX[key] < last then return fail(keyat, "key out of order " .. key) end
    last = INDEX[key]
    local text, at, quoted
    if p:sub(pos, pos) == '"' then
      local ve = p:find('"', pos + 1, true)
      if not ve then return fail(#p, "truncated head") end
      text, at, quoted = p:sub(pos + 1, ve - 1), pos, true
      pos = ve + 1
    else
      local s, e2 = p:find("^%-?[0-9][0-9eE%.%+%-]*", pos)
      if not s then return fail(pos - 1, key .. ": wrong value type") end
      text, at, quoted = p:sub(s, e2), pos - 1, false
      pos = e2 + 1
    end
    local fmt = f.json
    local wants_string = fmt == "str" or fmt == "hexstring"
    if quoted ~= wants_string then return fail(at, key .. ": wrong value type") end
    local v, why = value(f, fmt, text)
    if v == nil then return fail(at, key .. ": " .. why) end
    vals[key] = { v = v, off = at, len = #text }
    local c = p:sub(pos, pos)
    if c == "," then
      pos = pos + 1
    elseif c == "}" then
      pos = pos + 1
      break
    elseif c == "" then
      return fail(pos - 1, "truncated head")
    else
      return fail(pos - 1, "syntax error")
    end
  end
  local term = p:sub(pos, pos + #JSONH.terminator - 1)
  if term ~= JSONH.terminator then
    if #term < #JSONH.terminator and JSONH.terminator:sub(1, #term) == term then return fail(#p, "truncated head") end
    return fail(pos - 1, "syntax error")
  end
  for _, f in ipairs(FIELDS) do
    if f.json_always and not vals[f.key] then return fail(pos - 1, f.key .. ": required field missing") end
  end
  return vals, pos - 1 + #JSONH.terminator, JSONH.kind
end

-- parse_binary reads raet-go's binary head from the tvb.
local function parse_binary(tvb, n)
  local fixed_len = BINARY.bitmap_offset + BINARY.bitmap_bytes
  if n < 1 or tvb(BINARY.magic_offset, 1):uint() ~= BINARY.magic then return fail(0, "not a RAET head") end
  if n < fixed_len then return fail(n, "truncated head") end
  if tvb(BINARY.version_offset, 1):uint() ~= BINARY.version then return fail(BINARY.version_offset, "unsupported value") end
  local vals = {}
  for _, f in ipairs(FIELDS) do
    if f.fixed then
      vals[f.key] = { v = tvb(f.fixed[1], f.fixed[2]):uint(), off = f.fixed[1], len = f.fixed[2] }
    end
  end
  local hl = vals.hl.v
  if hl < fixed_len then return fail(0, "hl: head length does not match") end
  if hl > n then return fail(0, "hl: truncated head") end
  local function bit_set(i)
    local byte = tvb(BINARY.bitmap_offset + math.floor(i / 8), 1):uint()
    return math.floor(byte / 2 ^ (i % 8)) % 2 == 1
  end
  for i = #BITMAP, BINARY.bitmap_bytes * 8 - 1 do
    if bit_set(i) then return fail(BINARY.bitmap_offset, "unknown key") end
  end
  local pos = fixed_len
  for _, f in ipairs(BITMAP) do
    if bit_set(f.bit) then
      local v, start = nil, pos
      if f.benc == "u8" then
        if pos >= hl then return fail(pos, f.key .. ": truncated head") end
        v = tvb(pos, 1):uint()
        pos = pos + 1
      elseif f.benc == "uvarint" then
        v = 0
        local shift, done = 0, false
        while pos < hl and shift < 64 do
          local c = tvb(pos, 1):uint()
          pos = pos + 1
          v = v + (c % 128) * 2 ^ shift
          shift = shift + 7
          if c < 128 then done = true break end
        end
        if not done then return fail(start, f.key .. ": truncated head") end
        if v > max_of(f.bits) then return fail(start, f.key .. ": bad value") end
      elseif f.benc == "f64" then
        if hl - pos < 8 then return fail(pos, f.key .. ": truncated head") end
        v = tvb(pos, 8):float()
        pos = pos + 8
      end
      vals[f.key] = { v = v, off = start, len = pos - start }
    end
  end
  if pos ~= hl then return fail(pos, "hl: head length does not match") end
  return vals, hl, BINARY.kind
end

-- check applies the checks every head kind shares.
local function check(vals, hl, kind, n)
  for _, f in ipairs(FIELDS) do
    local v = vals[f.key]
    if v then
      if f.key == "hk" and v.v ~= kind then return fail(v.off, "hk: head kind does not match the encoding") end
      if f.accept and not f.accept[v.v] then return fail(v.off, f.key .. ": unsupported value") end
    end
  end
  if vals.hl.v ~= hl then return fail(vals.hl.off, "hl: head length does not match") end
  if vals.pl.v ~= n then return fail(vals.pl.off, "pl: packet length does not match") end
  return true
end

local function flag_set(v, mask) return math.floor(v / mask) % 2 == 1 end

local function name_of(f, v)
  if f.enum and ENUMS[f.enum][v] then return ENUMS[f.enum][v] end
  return tostring(v)
end

function raet.dissector(tvb, pinfo, tree)
  local n = tvb:reported_length_remaining()
  local captured = tvb:len()
  pinfo.cols.protocol = "RAET"
  local item = tree:add(raet, tvb())
  local buf = tvb:raw()
  local vals, hl, kind
  local first = captured > 0 and tvb(0, 1):uint() or -1
  if first == BINARY.magic then
    vals, hl, kind = parse_binary(tvb, captured)
  elseif buf:sub(1, 1) == "{" then
    vals, hl, kind = parse_json(buf, captured)
  else
    vals, hl, kind = parse_native(buf, captured)
  end
  local ok, why = vals ~= nil, hl
  if ok then
    ok, why = check(vals, hl, kind, n)
  end
  if not ok then
    if captured < n then why = "truncated by the capture: " .. why end
    item:add(PF.error, why)
    item:add_proto_expert_info(EXPERT, why)
    pinfo.cols.info = "RAET error: " .. why
    return captured
  end
  for _, f in ipairs(FIELDS) do
    local v = vals[f.key]
    local fi
    if v then
      fi = item:add(PF[f.key], tvb(v.off, v.len), v.v)
    else
      local dv = f.default
      if f.key == "hk" then dv = kind end
      fi = item:add(PF[f.key], tvb(0, 0), dv)
      fi:set_generated()
    end
    if f.key == FLAGS_KEY then
      local fg = v and v.v or f.default
      for _, fl in ipairs(FLAGS) do
        local t = fi:add(PF[fl.key], v and tvb(v.off, v.len) or tvb(0, 0), flag_set(fg, fl.mask))
        if not v then t:set_generated() end
      end
    end
  end
  local fl = vals.fl and vals.fl.v or BY_KEY.fl.default
  if hl + fl <= captured then
    if n - fl > hl then item:add(PF.coat, tvb(hl, n - fl - hl)) end
    if fl > 0 then item:add(PF.foot, tvb(n - fl, fl)) end
  end
  local function get(key)
    local v = vals[key]
    if v then return v.v end
    if key == "hk" then return kind end
    return BY_KEY[key].default
  end
  if get("tk") == 0 and (get("pk") == PK.bundle or get("pk") == PK.answers) and n <= captured and hl + fl <= n then
    local berr
    if get("pk") == PK.bundle then
      berr = dissect_bundle(tvb, item, hl, n - fl)
    else
      berr = dissect_answers(tvb, item, hl, n - fl)
    end
    if berr then
      item:add(PF.b_error, berr)
      item:add_proto_expert_info(EXPERT, berr)
    end
  end
  local info = name_of(BY_KEY.tk, get("tk")) .. " " .. name_of(BY_KEY.pk, get("pk")) ..
    " se=" .. get("se") .. " de=" .. get("de") .. " si=" .. get("si") .. " ti=" .. get("ti")
  local flags = {}
  for _, fl in ipairs(FLAGS) do
    if flag_set(get(FLAGS_KEY), fl.mask) then flags[#flags + 1] = fl.key end
  end
  if #flags > 0 then info = info .. " [" .. table.concat(flags, "|") .. "]" end
  if get("sc") > 1 then info = info .. " sn=" .. get("sn") .. "/" .. get("sc") end
  pinfo.cols.info = info
  item:append_text(", " .. name_of(BY_KEY.hk, kind) .. " head, " .. info)
  return captured
end

-- heuristic takes a UDP datagram on any port that starts like a RAET head.
local SECOND = FIELDS[2].key .. " "
local function heuristic(tvb, pinfo, tree)
  local n = tvb:len()
  if n >= #NATIVE.prefix + #SECOND and tvb(0, #NATIVE.prefix + #SECOND):string() == NATIVE.prefix .. SECOND then
    raet.dissector(tvb, pinfo, tree)
    return true
  end
  if n >= #JSONH.prefix and tvb(0, #JSONH.prefix):string() == JSONH.prefix then
    raet.dissector(tvb, pinfo, tree)
    return true
  end
  local pl = BY_KEY.pl.fixed
  if pl and n >= BINARY.bitmap_offset + BINARY.bitmap_bytes and tvb(BINARY.magic_offset, 1):uint() == BINARY.magic and
      tvb(BINARY.version_offset, 1):uint() == BINARY.version and tvb(pl[1], pl[2]):uint() == tvb:reported_length_remaining() then
    raet.dissector(tvb, pinfo, tree)
    return true
  end
  return false
end

DissectorTable.get("udp.port"):add(DEFAULT_PORT, raet)
raet:register_heuristic("udp", heuristic)

-- The lane: raet-go's capture record, then the page.
local function lane_fail(item, pinfo, why, n)
  item:add(LPF.error, why)
  item:add_proto_expert_info(LEXPERT, why)
  pinfo.cols.info = "RAET lane error: " .. why
  return n
end

function raet_lane.dissector(tvb, pinfo, tree)
  local n = tvb:len()
  pinfo.cols.protocol = "RAET lane"
  local item = tree:add(raet_lane, tvb())
  local rh = LANE.record_head
  if n < rh or tvb(0, #LANE.magic):string() ~= LANE.magic or tvb(#LANE.magic, 1):uint() ~= LANE.version then
    return lane_fail(item, pinfo, "not a lane record", n)
  end
  local flags, sl, dl = tvb(5, 1):uint(), tvb(6, 2):uint(), tvb(8, 2):uint()
  if rh + sl + dl > n then return lane_fail(item, pinfo, "not a lane record: socket paths overrun the record", n) end
  item:add(LPF.src, tvb(rh, sl))
  item:add(LPF.dst, tvb(rh + sl, dl))
  item:add(LPF.out, tvb(5, 1), flag_set(flags, LANE.flag_out))
  local start = rh + sl + dl
  local page = tvb:raw(start, n - start)
  if page:sub(1, #LANE.prefix) ~= LANE.prefix then return lane_fail(item, pinfo, "not a lane page", n) end
  local e = page:find(LANE.terminator, 1, true)
  if not e then return lane_fail(item, pinfo, "truncated head", n) end
  local lines, pos = {}, 1
  while pos < e do
    local le = page:find("\n", pos, true)
    if not le or le > e then le = e end
    lines[#lines + 1] = { text = page:sub(pos, le - 1), at = pos - 1 }
    pos = le + 1
  end
  local vals = {}
  for i, f in ipairs(LANE_FIELDS) do
    local l = lines[i]
    if not l then return lane_fail(item, pinfo, f.key .. ": required field missing", n) end
    local sp = l.text:find(" ", 1, true)
    if not sp or l.text:sub(1, sp - 1) ~= f.key then return lane_fail(item, pinfo, f.key .. ": required field missing", n) end
    local text = l.text:sub(sp + 1)
    local v
    if f.format == "str" then
      if text == "" or text:find("[%s%c]") or (f.width > 0 and #text ~= f.width) or (f.kind == "str" and f.default ~= "" and text ~= f.default) then
        return lane_fail(item, pinfo, f.key .. ": bad value", n)
      end
      v = text
    else
      v = parse_hex(text, f.bits)
      if v == nil or (f.enum and not ENUMS[f.enum][v]) then return lane_fail(item, pinfo, f.key .. ": bad value", n) end
    end
    vals[#vals + 1] = { f = f, v = v, off = start + l.at + sp, len = #text }
  end
  if #lines > #LANE_FIELDS then return lane_fail(item, pinfo, "unknown key", n) end
  for _, v in ipairs(vals) do item:add(LPF[v.f.key], tvb(v.off, v.len), v.v) end
  local hl = e - 1 + #LANE.terminator
  if start + hl < n then item:add(LPF.body, tvb(start + hl, n - start - hl)) end
  local by = {}
  for _, v in ipairs(vals) do by[v.f.key] = v.v end
  pinfo.cols.info = "lane " .. by.sn .. " > " .. by.dn .. " page " .. by.pn .. "/" .. by.pc .. " bi=" .. by.bi
  if by.pk == 0 and by.pc == 1 and start + hl < n then
    local kind = bus_envelope(item, tvb, start + hl, page:sub(hl + 1))
    if kind then pinfo.cols.info = tostring(pinfo.cols.info) .. " bus " .. kind end
  end
  return n
end

DissectorTable.get("wtap_encap"):add(wtap_encaps.USER0, raet_lane)
`
