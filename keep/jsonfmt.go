package keep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/raet-go/raet/internal/pyjson"
	"github.com/raet-go/raet/keys"
)

// This file holds the two halves of the on-disk format: objWriter, which
// writes an object byte for byte as Python's json.dump(obj, indent=2) does
// with the default ensure_ascii=True, and object, a strict reader that yields
// each field's raw JSON only if the field set is exactly the expected one.

// objWriter writes one top-level JSON object in the reference's layout.
type objWriter struct {
	buf   bytes.Buffer
	count int
}

func (w *objWriter) key(k string) {
	if w.count == 0 {
		w.buf.WriteString("{\n  ")
	} else {
		w.buf.WriteString(",\n  ")
	}
	w.count++
	writePyString(&w.buf, k)
	w.buf.WriteString(": ")
}

func (w *objWriter) str(k, v string) {
	w.key(k)
	writePyString(&w.buf, v)
}

func (w *objWriter) uint(k string, v uint64) {
	w.key(k)
	w.buf.WriteString(strconv.FormatUint(v, 10))
}

func (w *objWriter) bool(k string, v bool) {
	w.key(k)
	w.buf.WriteString(strconv.FormatBool(v))
}

func (w *objWriter) optBool(k string, v *bool) {
	if v == nil {
		w.key(k)
		w.buf.WriteString("null")
		return
	}
	w.bool(k, *v)
}

// hostPort writes [host, port] as a list nested at depth 1: each item on its
// own line indented by four spaces, the closing bracket by two.
func (w *objWriter) hostPort(k string, v *HostPort) {
	w.key(k)
	if v == nil {
		w.buf.WriteString("null")
		return
	}
	w.buf.WriteString("[\n    ")
	writePyString(&w.buf, v.Host)
	w.buf.WriteString(",\n    ")
	w.buf.WriteString(strconv.FormatUint(uint64(v.Port), 10))
	w.buf.WriteString("\n  ]")
}

func (w *objWriter) bytes() []byte {
	if w.count == 0 {
		return []byte("{}")
	}
	w.buf.WriteString("\n}")
	return w.buf.Bytes()
}

// writePyString writes s as a JSON string the way Python's json module does
// (see pyjson.AppendString). s must be valid UTF-8 (Validate checks it).
func writePyString(b *bytes.Buffer, s string) {
	b.Write(pyjson.AppendString(b.AvailableBuffer(), s))
}

// maxFileSize bounds what a reader takes in; real keep files are well under
// a kilobyte.
const maxFileSize = 64 << 10

// object is a decoded top-level JSON object: each field's raw value.
type object map[string]json.RawMessage

// corruptf returns an error wrapping ErrCorrupt.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// readObject parses data as exactly one JSON object with exactly the fields
// in want, each once. Errors wrap ErrCorrupt.
func readObject(data []byte, want []string) (object, error) {
	if len(data) > maxFileSize {
		return nil, corruptf("%d bytes, more than the %d a keep file may have", len(data), maxFileSize)
	}
	if !utf8.Valid(data) {
		return nil, corruptf("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, corruptf("empty file")
		}
		return nil, corruptf("bad JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, corruptf("not a JSON object")
	}
	obj := make(object, len(want))
	var order []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, corruptf("bad JSON: %v", err)
		}
		k, ok := tok.(string)
		if !ok { // the decoder only yields strings in key position
			return nil, corruptf("bad JSON: object key is not a string")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, corruptf("bad JSON in field %q: %v", k, err)
		}
		if _, dup := obj[k]; dup {
			return nil, corruptf("field %q appears twice", k)
		}
		obj[k] = raw
		order = append(order, k)
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, corruptf("bad JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, corruptf("data after the object")
	}
	var missing, extra []string
	for _, k := range want {
		if _, ok := obj[k]; !ok {
			missing = append(missing, strconv.Quote(k))
		}
	}
	for _, k := range order {
		if !slices.Contains(want, k) {
			extra = append(extra, quoteShort(k))
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		var parts []string
		if len(missing) > 0 {
			parts = append(parts, "missing "+strings.Join(missing, ", "))
		}
		if len(extra) > 0 {
			if len(extra) > 5 {
				extra = append(extra[:5], "...")
			}
			parts = append(parts, "unexpected "+strings.Join(extra, ", "))
		}
		return nil, corruptf("wrong field set: %s", strings.Join(parts, "; "))
	}
	return obj, nil
}

// quoteShort quotes a field name from a file, cut to a readable length.
func quoteShort(s string) string {
	const max = 40
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "..."
	}
	return strconv.Quote(s)
}

// jsonKind names the JSON type of a raw value, for messages; it never
// returns the value itself, which may be a secret.
func jsonKind(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func wrongType(field, want string, raw json.RawMessage) error {
	return corruptf("field %q: want %s, got %s", field, want, jsonKind(raw))
}

func (o object) str(field string) (string, error) {
	raw := o[field]
	if len(raw) == 0 || raw[0] != '"' {
		return "", wrongType(field, "a string", raw)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", corruptf("field %q: %v", field, err)
	}
	return s, nil
}

func (o object) uint(field string, max uint64) (uint64, error) {
	return parseUint(field, o[field], max)
}

func parseUint(field string, raw json.RawMessage, max uint64) (uint64, error) {
	if !pyjson.IsInt(raw) {
		return 0, wrongType(field, "an integer", raw)
	}
	v, err := strconv.ParseUint(string(raw), 10, 64)
	if err != nil || v > max {
		return 0, corruptf("field %q: integer out of range 0..%d", field, max)
	}
	return v, nil
}

func (o object) bool(field string) (bool, error) {
	switch string(o[field]) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, wrongType(field, "true or false", o[field])
}

func (o object) optBool(field string) (*bool, error) {
	if string(o[field]) == "null" {
		return nil, nil
	}
	v, err := o.bool(field)
	if err != nil {
		return nil, wrongType(field, "true, false or null", o[field])
	}
	return &v, nil
}

func (o object) hostPort(field string) (HostPort, error) {
	raw := o[field]
	if len(raw) == 0 || raw[0] != '[' {
		return HostPort{}, wrongType(field, "a [host, port] list", raw)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return HostPort{}, corruptf("field %q: %v", field, err)
	}
	if len(items) != 2 {
		return HostPort{}, corruptf("field %q: want a [host, port] list, got %d items", field, len(items))
	}
	host, err := object{field + "[0]": items[0]}.str(field + "[0]")
	if err != nil {
		return HostPort{}, err
	}
	port, err := parseUint(field+"[1]", items[1], 0xffff)
	if err != nil {
		return HostPort{}, err
	}
	return HostPort{Host: host, Port: uint16(port)}, nil
}

func (o object) optHostPort(field string) (*HostPort, error) {
	if string(o[field]) == "null" {
		return nil, nil
	}
	v, err := o.hostPort(field)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

func (o object) name(field string) (string, error) {
	s, err := o.str(field)
	if err != nil {
		return "", err
	}
	if err := CheckName(s); err != nil {
		return "", corruptf("field %q: %v", field, err)
	}
	return s, nil
}

// hexKey reads a string field and parses it with parse; a parse error says
// only what is wrong, not the value.
func hexKey[K interface{ IsZero() bool }](o object, field string, parse func(string) (K, error)) (K, error) {
	var zero K
	s, err := o.str(field)
	if err != nil {
		return zero, err
	}
	k, err := parse(s)
	if err != nil {
		return zero, corruptf("field %q: %v", field, err)
	}
	if k.IsZero() {
		return zero, corruptf("field %q: the zero key", field)
	}
	return k, nil
}

// The field sets and their order, from the reference's RoadKeep
// (LocalDumpFields, RemoteDumpFields, LocalRoleFields, RemoteRoleFields).
var (
	localEstateFields  = []string{"name", "uid", "ha", "iha", "natted", "fqdn", "dyned", "sid", "puid", "aha", "role"}
	remoteEstateFields = []string{"name", "uid", "fuid", "ha", "iha", "natted", "fqdn", "dyned", "sid", "main", "kind", "joined", "role"}
	localRoleFields    = []string{"role", "sighex", "prihex"}
	remoteRoleFields   = []string{"role", "acceptance", "verhex", "pubhex"}
)

// MarshalJSON returns e exactly as the reference writes local/estate.json.
// It fails if e does not pass Validate.
func (e LocalEstate) MarshalJSON() ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	var w objWriter
	w.str("name", e.Name)
	w.uint("uid", uint64(e.UID))
	w.hostPort("ha", &e.HA)
	w.hostPort("iha", e.IHA)
	w.optBool("natted", e.Natted)
	w.str("fqdn", e.FQDN)
	w.optBool("dyned", e.Dyned)
	w.uint("sid", uint64(e.SID))
	w.uint("puid", uint64(e.PUID))
	w.hostPort("aha", &e.AHA)
	w.str("role", e.Role)
	return w.bytes(), nil
}

// UnmarshalJSON parses a local/estate.json file strictly: exactly the
// reference's field set, each of the expected type. Errors wrap ErrCorrupt.
// On error e is left unchanged.
func (e *LocalEstate) UnmarshalJSON(data []byte) error {
	o, err := readObject(data, localEstateFields)
	if err != nil {
		return err
	}
	var v LocalEstate
	if v.Name, err = o.name("name"); err != nil {
		return err
	}
	if v.UID, err = o.u32("uid"); err != nil {
		return err
	}
	if v.HA, err = o.hostPort("ha"); err != nil {
		return err
	}
	if v.IHA, err = o.optHostPort("iha"); err != nil {
		return err
	}
	if v.Natted, err = o.optBool("natted"); err != nil {
		return err
	}
	if v.FQDN, err = o.str("fqdn"); err != nil {
		return err
	}
	if v.Dyned, err = o.optBool("dyned"); err != nil {
		return err
	}
	if v.SID, err = o.u32("sid"); err != nil {
		return err
	}
	if v.PUID, err = o.u32("puid"); err != nil {
		return err
	}
	if v.AHA, err = o.hostPort("aha"); err != nil {
		return err
	}
	if v.Role, err = o.name("role"); err != nil {
		return err
	}
	*e = v
	return nil
}

// MarshalJSON returns e exactly as the reference writes
// remote/estate.<name>.json. It fails if e does not pass Validate.
func (e RemoteEstate) MarshalJSON() ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	var w objWriter
	w.str("name", e.Name)
	w.uint("uid", uint64(e.UID))
	w.uint("fuid", uint64(e.FUID))
	w.hostPort("ha", &e.HA)
	w.hostPort("iha", e.IHA)
	w.optBool("natted", e.Natted)
	w.str("fqdn", e.FQDN)
	w.optBool("dyned", e.Dyned)
	w.uint("sid", uint64(e.SID))
	w.bool("main", e.Main)
	w.uint("kind", uint64(e.Kind))
	w.optBool("joined", e.Joined)
	w.str("role", e.Role)
	return w.bytes(), nil
}

// UnmarshalJSON parses a remote/estate.<name>.json file strictly: exactly
// the reference's field set, each of the expected type. Errors wrap
// ErrCorrupt. On error e is left unchanged.
func (e *RemoteEstate) UnmarshalJSON(data []byte) error {
	o, err := readObject(data, remoteEstateFields)
	if err != nil {
		return err
	}
	var v RemoteEstate
	if v.Name, err = o.name("name"); err != nil {
		return err
	}
	if v.UID, err = o.u32("uid"); err != nil {
		return err
	}
	if v.FUID, err = o.u32("fuid"); err != nil {
		return err
	}
	if v.HA, err = o.hostPort("ha"); err != nil {
		return err
	}
	if v.IHA, err = o.optHostPort("iha"); err != nil {
		return err
	}
	if v.Natted, err = o.optBool("natted"); err != nil {
		return err
	}
	if v.FQDN, err = o.str("fqdn"); err != nil {
		return err
	}
	if v.Dyned, err = o.optBool("dyned"); err != nil {
		return err
	}
	if v.SID, err = o.u32("sid"); err != nil {
		return err
	}
	if v.Main, err = o.bool("main"); err != nil {
		return err
	}
	kind, err := o.uint("kind", 0xff)
	if err != nil {
		return err
	}
	v.Kind = uint8(kind)
	if v.Joined, err = o.optBool("joined"); err != nil {
		return err
	}
	if v.Role, err = o.name("role"); err != nil {
		return err
	}
	*e = v
	return nil
}

// MarshalJSON returns r exactly as the reference writes role/local/role.json,
// secrets included. It fails if r does not pass Validate.
func (r LocalRole) MarshalJSON() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	var w objWriter
	w.str("role", r.Role)
	w.str("sighex", r.Seed.Hex())
	w.str("prihex", r.Private.Hex())
	return w.bytes(), nil
}

// UnmarshalJSON parses a role/local/role.json file strictly. Hex may be in
// either case. Errors wrap ErrCorrupt and never contain the secrets. On
// error r is left unchanged.
func (r *LocalRole) UnmarshalJSON(data []byte) error {
	o, err := readObject(data, localRoleFields)
	if err != nil {
		return err
	}
	var v LocalRole
	if v.Role, err = o.name("role"); err != nil {
		return err
	}
	if v.Seed, err = hexKey(o, "sighex", keys.ParseSigningSeed); err != nil {
		return err
	}
	if v.Private, err = hexKey(o, "prihex", keys.ParsePrivateKey); err != nil {
		return err
	}
	*r = v
	return nil
}

// MarshalJSON returns r exactly as the reference writes
// role/remote/role.<role>.json. It fails if r does not pass Validate.
func (r RemoteRole) MarshalJSON() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	var w objWriter
	w.str("role", r.Role)
	w.uint("acceptance", uint64(r.Acceptance))
	w.str("verhex", r.Verify.Hex())
	w.str("pubhex", r.Public.Hex())
	return w.bytes(), nil
}

// UnmarshalJSON parses a role/remote/role.<role>.json file strictly. The
// acceptance must be 0, 1 or 2. Errors wrap ErrCorrupt. On error r is left
// unchanged.
func (r *RemoteRole) UnmarshalJSON(data []byte) error {
	o, err := readObject(data, remoteRoleFields)
	if err != nil {
		return err
	}
	var v RemoteRole
	if v.Role, err = o.name("role"); err != nil {
		return err
	}
	acc, err := o.uint("acceptance", uint64(Rejected))
	if err != nil {
		return err
	}
	v.Acceptance = Acceptance(acc)
	if v.Verify, err = hexKey(o, "verhex", keys.ParseVerifyKey); err != nil {
		return err
	}
	if v.Public, err = hexKey(o, "pubhex", keys.ParsePublicKey); err != nil {
		return err
	}
	*r = v
	return nil
}

func (o object) u32(field string) (uint32, error) {
	v, err := o.uint(field, 0xffffffff)
	return uint32(v), err
}
