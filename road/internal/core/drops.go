package core

import (
	"errors"
	"strconv"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// dropReason says why the core dropped a datagram it received (or, for
// dropPackError, one it could not make). Counters.Drops counts them by
// name; the names are stable (they are what operators and tests read).
type dropReason uint8

// The drop reasons, by name.
const (
	dropAEADOpenFailed       dropReason = iota // aead_open_failed
	dropAEADReplayed                           // aead_replayed
	dropAEADTooOld                             // aead_too_old
	dropAllowCookie                            // allow_cookie
	dropAllowHello                             // allow_hello
	dropAllowInitiate                          // allow_initiate
	dropAnswers                                // answers
	dropBody                                   // body
	dropBroadcast                              // broadcast
	dropBundle                                 // bundle
	dropBundleEntryBusy                        // bundle_entry_busy
	dropBundleUnnegotiated                     // bundle_unnegotiated
	dropCapsMismatch                           // caps_mismatch
	dropCoatDowngrade                          // coat_downgrade
	dropCoatOpen                               // coat_open
	dropFootKind                               // foot_kind
	dropFootLength                             // foot_length
	dropHeadInvalid                            // head_invalid
	dropHeadLength                             // head_length
	dropHeadSyntax                             // head_syntax
	dropHeadTruncated                          // head_truncated
	dropHeadUnknownKey                         // head_unknown_key
	dropHeadUnsupported                        // head_unsupported
	dropJoinAckUnaccepted                      // join_ack_unaccepted
	dropJoinBody                               // join_body
	dropJoinBudget                             // join_budget
	dropJoinNonzeroSID                         // join_nonzero_sid
	dropJoinStale                              // join_stale
	dropJoinStaleNUID                          // join_stale_nuid
	dropJoinUnknownJoinee                      // join_unknown_joinee
	dropJoinWrongSource                        // join_wrong_source
	dropJoinZeroFUID                           // join_zero_fuid
	dropJoinZeroNUID                           // join_zero_nuid
	dropKeepBusy                               // keep_busy
	dropKeepFailed                             // keep_failed
	dropMessageIDRepeated                      // message_id_repeated
	dropNotRAET                                // not_raet
	dropPackError                              // pack_error
	dropParseError                             // parse_error
	dropPendingStrangersFull                   // pending_strangers_full
	dropPresenceShed                           // presence_shed
	dropReassemblyEvicted                      // reassembly_evicted
	dropReassemblyFull                         // reassembly_full
	dropReassemblyRemoteFull                   // reassembly_remote_full
	dropReceiveQueueFull                       // receive_queue_full
	dropReceiveWaitsFull                       // receive_waits_full
	dropReplayTooOld                           // replay_too_old
	dropReplayed                               // replayed
	dropReplyBudget                            // reply_budget
	dropResendBody                             // resend_body
	dropResendRange                            // resend_range
	dropSegment                                // segment
	dropStaleAnswer                            // stale_answer
	dropStaleCorrespondent                     // stale_correspondent
	dropStaleMessage                           // stale_message
	dropStalePacket                            // stale_packet
	dropStaleReply                             // stale_reply
	dropStaleSID                               // stale_sid
	dropStaleUnknown                           // stale_unknown
	dropUnknownDestination                     // unknown_destination
	dropUnsigned                               // unsigned
	dropVerifyFailed                           // verify_failed
	dropVerifyStaleKey                         // verify_stale_key
	dropVerifyUnknownKey                       // verify_unknown_key
	dropZeroSID                                // zero_sid
	dropZeroUID                                // zero_uid
	numDropReasons
)

var dropNames = [numDropReasons]string{"aead_open_failed", "aead_replayed", "aead_too_old", "allow_cookie", "allow_hello", "allow_initiate", "answers", "body", "broadcast", "bundle", "bundle_entry_busy", "bundle_unnegotiated", "caps_mismatch", "coat_downgrade", "coat_open", "foot_kind", "foot_length", "head_invalid", "head_length", "head_syntax", "head_truncated", "head_unknown_key", "head_unsupported", "join_ack_unaccepted", "join_body", "join_budget", "join_nonzero_sid", "join_stale", "join_stale_nuid", "join_unknown_joinee", "join_wrong_source", "join_zero_fuid", "join_zero_nuid", "keep_busy", "keep_failed", "message_id_repeated", "not_raet", "pack_error", "parse_error", "pending_strangers_full", "presence_shed", "reassembly_evicted", "reassembly_full", "reassembly_remote_full", "receive_queue_full", "receive_waits_full", "replay_too_old", "replayed", "reply_budget", "resend_body", "resend_range", "segment", "stale_answer", "stale_correspondent", "stale_message", "stale_packet", "stale_reply", "stale_sid", "stale_unknown", "unknown_destination", "unsigned", "verify_failed", "verify_stale_key", "verify_unknown_key", "zero_sid", "zero_uid"}

func (r dropReason) String() string {
	if r < numDropReasons {
		return dropNames[r]
	}
	return "drop(" + strconv.Itoa(int(r)) + ")"
}

// errDrop is the drop reason of a datagram refused with err.
func errDrop(err error) dropReason {
	var ce *codec.Error
	if errors.As(err, &ce) {
		switch {
		case errors.Is(err, codec.ErrPrefix):
			return dropNotRAET
		case errors.Is(err, codec.ErrUnknownKey):
			return dropHeadUnknownKey
		case errors.Is(err, codec.ErrSyntax):
			return dropHeadSyntax
		case errors.Is(err, codec.ErrUnsupported):
			return dropHeadUnsupported
		case errors.Is(err, codec.ErrPacketLength), errors.Is(err, codec.ErrHeadLength):
			return dropHeadLength
		case errors.Is(err, codec.ErrShort), errors.Is(err, codec.ErrTooLong):
			return dropHeadTruncated
		}
		return dropHeadInvalid
	}
	switch {
	case errors.Is(err, errCoatKind):
		return dropCoatDowngrade
	case errors.Is(err, packet.ErrFootKind), errors.Is(err, packet.ErrUnknownFoot), errors.Is(err, packet.ErrPacketTooShort):
		return dropFootLength
	case errors.Is(err, packet.ErrUnknownVerifyKey):
		return dropVerifyUnknownKey
	case errors.Is(err, packet.ErrFootVerify), errors.Is(err, packet.ErrFootLength):
		return dropVerifyFailed
	case errors.Is(err, packet.ErrCoatOpen), errors.Is(err, packet.ErrCoatShort):
		return dropCoatOpen
	}
	var be *packet.BodyError
	if errors.As(err, &be) {
		return dropBody
	}
	return dropParseError
}
