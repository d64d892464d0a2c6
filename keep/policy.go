package keep

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/raet-go/raet/keys"
)

// Decide applies the reference's acceptance policy (RoadKeep.statusRole) to
// the keys a remote offers for a role. stored is the role's record, nil if
// there is none. It returns the status to act on and whether the record
// should be written as {role, status, verify, pub}:
//
//	auto    nothing stored  stored accepted          stored pending           stored rejected
//	always  accepted        accepted (keys replaced) accepted                 accepted
//	once    accepted        same keys: accepted      same keys: accepted      rejected
//	                        else rejected            else rejected
//	never   pending         same keys: accepted      same keys: pending       rejected
//	                        else rejected            else rejected
//
// A rejected status is never written: when keys differ, the stored keys and
// status stay as they were, and a stored rejection only changes through an
// operator (or auto always). Otherwise the record is written when it does not
// exist or when the status or a key changes.
//
// Decide fails, with an error wrapping ErrInvalid, for an unknown auto mode,
// a stored record with an invalid acceptance, or a zero offered key.
func Decide(auto AutoMode, stored *RemoteRole, verify keys.VerifyKey, pub keys.PublicKey) (status Acceptance, write bool, err error) {
	if !auto.Valid() {
		return Rejected, false, fmt.Errorf("%w: auto mode %d", ErrInvalid, uint8(auto))
	}
	if verify.IsZero() || pub.IsZero() {
		return Rejected, false, fmt.Errorf("%w: offered a zero key", ErrInvalid)
	}
	if stored != nil && !stored.Acceptance.Valid() {
		return Rejected, false, fmt.Errorf("%w: stored acceptance %d", ErrInvalid, uint8(stored.Acceptance))
	}
	same := stored != nil && stored.Verify.Equal(verify) && stored.Public.Equal(pub)

	switch {
	case auto == AutoAlways:
		status = Accepted
	case stored == nil:
		if auto == AutoOnce {
			status = Accepted
		} else {
			status = Pending
		}
	case stored.Acceptance == Rejected:
		status = Rejected
	case !same:
		status = Rejected
	case stored.Acceptance == Accepted:
		status = Accepted
	case auto == AutoOnce: // stored pending, same keys
		status = Accepted
	default: // never, stored pending, same keys
		status = Pending
	}

	write = status != Rejected && (stored == nil || !same || stored.Acceptance != status)
	return status, write, nil
}

// StatusRole decides, under the keep's AutoMode, whether the keys a remote
// offers for role are accepted, pending or rejected (see Decide), and writes
// the role's record when Decide says so. A corrupt role file is moved aside
// and its *FileError returned (the caller should refuse the remote); it is
// not treated as "nothing stored", which under auto once would accept any
// keys.
func (k *Keep) StatusRole(role string, verify keys.VerifyKey, pub keys.PublicKey) (Acceptance, error) {
	return k.StatusRoleAs(k.auto, role, verify, pub)
}

// StatusRoleAs is StatusRole under the acceptance mode auto instead of the
// keep's: for keys a caller has its own policy for, such as a road estate
// trusting on first use the main it chose to join.
func (k *Keep) StatusRoleAs(auto AutoMode, role string, verify keys.VerifyKey, pub keys.PublicKey) (Acceptance, error) {
	status, err := k.statusRoleAs(auto, role, verify, pub)
	if err == nil {
		_, err = k.ExpireUnjoined()
	}
	return status, err
}

func (k *Keep) statusRoleAs(auto AutoMode, role string, verify keys.VerifyKey, pub keys.PublicKey) (Acceptance, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var stored *RemoteRole
	r, err := k.loadRemoteRole(role)
	switch {
	case err == nil:
		stored = &r
	case errors.Is(err, fs.ErrNotExist):
	default:
		return Rejected, err
	}
	status, write, err := Decide(auto, stored, verify, pub)
	if err != nil {
		return Rejected, fmt.Errorf("keep: status of role %q: %w", role, err)
	}
	if write {
		r := RemoteRole{Role: role, Acceptance: status, Verify: verify, Public: pub}
		if err := k.saveRemoteRole(r); err != nil {
			return Rejected, err
		}
		if k.unjoined != nil {
			k.unjoined.saved(r, time.Now())
		}
	}
	return status, nil
}

// SetAcceptance is the operator's decision: it writes status as the stored
// acceptance of role, keeping the stored keys. The role must have a record
// (StatusRole writes one when a remote first offers keys); otherwise the
// error wraps fs.ErrNotExist.
func (k *Keep) SetAcceptance(role string, status Acceptance) error {
	if !status.Valid() {
		return fmt.Errorf("keep: set acceptance of role %q: %w: %d", role, ErrInvalid, uint8(status))
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	r, err := k.loadRemoteRole(role)
	if err != nil {
		return err
	}
	if k.unjoined != nil {
		k.unjoined.decided(role) // the operator's: kept whatever it is
	}
	if r.Acceptance == status {
		return nil
	}
	r.Acceptance = status
	return k.saveRemoteRole(r)
}

// Accept marks role's stored keys accepted (SetAcceptance with Accepted).
func (k *Keep) Accept(role string) error { return k.SetAcceptance(role, Accepted) }

// Reject marks role's stored keys rejected (SetAcceptance with Rejected).
func (k *Keep) Reject(role string) error { return k.SetAcceptance(role, Rejected) }

// Pend marks role's stored keys pending (SetAcceptance with Pending).
func (k *Keep) Pend(role string) error { return k.SetAcceptance(role, Pending) }
