package keep

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/raet-go/raet/keys"
	"github.com/raet-go/raet/protocol"
)

// HostPort is a host address as the reference keeps it: a JSON list
// [host, port]. Host is kept as written (it may be "" for "all interfaces").
type HostPort struct {
	Host string
	Port uint16
}

// String returns "host:port" ("[host]:port" for IPv6) for messages; it is
// not the on-disk form.
func (h HostPort) String() string { return net.JoinHostPort(h.Host, strconv.Itoa(int(h.Port))) }

// LocalEstate is <dir>/local/estate.json: the local estate of the stack.
// Its fields are written in this order, under the JSON names given.
type LocalEstate struct {
	Name   string    // "name": unique estate name
	UID    uint32    // "uid": the local estate's uid
	HA     HostPort  // "ha": the estate's (external) host address
	IHA    *HostPort // "iha": internal host address; nil is null
	Natted *bool     // "natted": behind NAT; nil is null (unknown)
	FQDN   string    // "fqdn": fully qualified domain name, may be ""
	Dyned  *bool     // "dyned": dynamic address; nil is null (unknown)
	SID    uint32    // "sid": session id counter of the local estate
	PUID   uint32    // "puid": the stack's uid counter (§9.1)
	AHA    HostPort  // "aha": the stack's listening address, host may be ""
	Role   string    // "role": role selecting the key record, default the name
}

// RemoteEstate is <dir>/remote/estate.<name>.json: one remote estate.
// Its fields are written in this order, under the JSON names given.
type RemoteEstate struct {
	Name   string    // "name": the remote's name; also names the file
	UID    uint32    // "uid": our uid for the remote (its nuid)
	FUID   uint32    // "fuid": the uid the remote gave us
	HA     HostPort  // "ha": the address the remote joined from
	IHA    *HostPort // "iha": internal host address; nil is null
	Natted *bool     // "natted": nil is null (unknown)
	FQDN   string    // "fqdn": may be ""
	Dyned  *bool     // "dyned": nil is null (unknown)
	SID    uint32    // "sid": session id of transactions we start
	Main   bool      // "main": the remote is a main estate
	Kind   uint8     // "kind": application kind, 0..255
	Joined *bool     // "joined": nil is null (not yet joined), else the outcome
	Role   string    // "role": the remote's role (its RemoteRole record)
}

// LocalRole is <dir>/role/local/role.json: the local role and its secret keys.
type LocalRole struct {
	Role    string           // "role"
	Seed    keys.SigningSeed // "sighex": Ed25519 seed, secret, never zero
	Private keys.PrivateKey  // "prihex": Curve25519 private key, secret, never zero
}

// RemoteRole is <dir>/role/remote/role.<role>.json: what we accept for a
// remote role.
type RemoteRole struct {
	Role       string         // "role": also names the file
	Acceptance Acceptance     // "acceptance": 0 pending, 1 accepted, 2 rejected
	Verify     keys.VerifyKey // "verhex": never zero
	Public     keys.PublicKey // "pubhex": never zero
}

// Acceptance is the status of a remote role's keys, stored as an integer.
// Its values and names come from spec/raet.yaml (protocol.Acceptance).
type Acceptance = protocol.Acceptance

// The acceptance values.
const (
	Pending  = protocol.AcceptancePending  // waiting for an operator
	Accepted = protocol.AcceptanceAccepted // keys trusted
	Rejected = protocol.AcceptanceRejected // keys refused
)

// AutoMode says how StatusRole treats keys no operator has decided on.
// The zero value is AutoNever, the reference's default. Its values and names
// come from spec/raet.yaml (protocol.AutoMode).
type AutoMode = protocol.AutoMode

// The auto modes.
const (
	AutoNever  = protocol.AutoModeNever  // new keys wait as pending for an operator
	AutoOnce   = protocol.AutoModeOnce   // the first keys of a role are accepted, later different keys rejected
	AutoAlways = protocol.AutoModeAlways // any keys are accepted and replace the stored ones
)

// ParseAutoMode parses "never", "once" or "always" (any case), or the
// number "0", "1" or "2".
func ParseAutoMode(s string) (AutoMode, error) {
	if m, ok := protocol.ParseAutoMode(strings.ToLower(s)); ok {
		return m, nil
	}
	if n, err := strconv.ParseUint(s, 10, 8); err == nil && AutoMode(n).Valid() {
		return AutoMode(n), nil
	}
	return 0, fmt.Errorf("keep: unknown auto mode %q (want never, once or always)", s)
}

// MaxNameLen is the longest estate name or role, in bytes, that the keep
// accepts, so that "estate.<name>.json.corrupt.<n>" still fits in one path
// element on common file systems.
const MaxNameLen = 200

// CheckName reports whether s can name a remote estate or a role: it must be
// non-empty valid UTF-8 of at most MaxNameLen bytes, not "." or "..", and
// contain no space, no '/' or '\\', no NUL and no other control character.
// The error wraps ErrInvalidName.
func CheckName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(s) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidName, len(s), MaxNameLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidName, s)
	case s == "." || s == "..":
		return fmt.Errorf("%w: %q", ErrInvalidName, s)
	}
	for _, r := range s {
		switch {
		case r == ' ':
			return fmt.Errorf("%w: %q contains a space", ErrInvalidName, s)
		case r == '/' || r == '\\':
			return fmt.Errorf("%w: %q contains a path separator", ErrInvalidName, s)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return fmt.Errorf("%w: %q contains a control character", ErrInvalidName, s)
		}
	}
	return nil
}

func checkText(field, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: field %q is not valid UTF-8", ErrInvalid, field)
	}
	return nil
}

func checkNameField(field, s string) error {
	if err := CheckName(s); err != nil {
		return fmt.Errorf("field %q: %w", field, err)
	}
	return nil
}

func checkHA(field string, h *HostPort) error {
	if h == nil {
		return nil
	}
	return checkText(field, h.Host)
}

// Validate checks that e can be written and read back: name and role pass
// CheckName, text is valid UTF-8. Errors wrap ErrInvalid.
func (e *LocalEstate) Validate() error {
	if err := checkNameField("name", e.Name); err != nil {
		return err
	}
	if err := checkNameField("role", e.Role); err != nil {
		return err
	}
	if err := checkHA("ha", &e.HA); err != nil {
		return err
	}
	if err := checkHA("iha", e.IHA); err != nil {
		return err
	}
	if err := checkHA("aha", &e.AHA); err != nil {
		return err
	}
	return checkText("fqdn", e.FQDN)
}

// Validate checks that e can be written and read back: name and role pass
// CheckName, text is valid UTF-8. Errors wrap ErrInvalid.
func (e *RemoteEstate) Validate() error {
	if err := checkNameField("name", e.Name); err != nil {
		return err
	}
	if err := checkNameField("role", e.Role); err != nil {
		return err
	}
	if err := checkHA("ha", &e.HA); err != nil {
		return err
	}
	if err := checkHA("iha", e.IHA); err != nil {
		return err
	}
	return checkText("fqdn", e.FQDN)
}

// Validate checks that r can be written and read back: the role passes
// CheckName and neither key is zero. Errors wrap ErrInvalid.
func (r *LocalRole) Validate() error {
	if err := checkNameField("role", r.Role); err != nil {
		return err
	}
	if r.Seed.IsZero() {
		return fmt.Errorf("%w: field \"sighex\" is the zero key", ErrInvalid)
	}
	if r.Private.IsZero() {
		return fmt.Errorf("%w: field \"prihex\" is the zero key", ErrInvalid)
	}
	return nil
}

// Validate checks that r can be written and read back: the role passes
// CheckName, the acceptance is valid and neither key is zero. Errors wrap
// ErrInvalid.
func (r *RemoteRole) Validate() error {
	if err := checkNameField("role", r.Role); err != nil {
		return err
	}
	if !r.Acceptance.Valid() {
		return fmt.Errorf("%w: field \"acceptance\" is %d, want 0, 1 or 2", ErrInvalid, uint8(r.Acceptance))
	}
	if r.Verify.IsZero() {
		return fmt.Errorf("%w: field \"verhex\" is the zero key", ErrInvalid)
	}
	if r.Public.IsZero() {
		return fmt.Errorf("%w: field \"pubhex\" is the zero key", ErrInvalid)
	}
	return nil
}
