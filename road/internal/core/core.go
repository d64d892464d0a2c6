package core

import (
	"log/slog"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// Core is an estate's state and protocol logic, with no sockets, no
// goroutines and no clock (see the package doc and api.go). It is not safe
// for concurrent use: one goroutine, the owner, makes every call.
type Core struct {
	cfg   *Config
	log   *slog.Logger
	now   time.Time
	store Store

	local    localEstate // who we are (local.go)
	roster   roster      // the remotes we hold (roster.go)
	joinLogs logBudget   // bounds the Info lines of joins (a flood of strangers)

	codec  codec.Codec
	bodies packet.Serializer
	signer *packet.NaClFoot // signs with our key (FootChecker verifies)

	spares spares // emptied tables, messengers and windows, for reuse (spares.go)

	reasm *packet.Reassembler[uint32, msgKey] // owned by remote (nuid)
	lim   limits

	kept keeper // the keep's roles, the writes to it, the joins pending on it (keeper.go)

	tx       outbox   // what is made to send, and what sends (outbox.go)
	bundling bundling // the messages and answers of this moment (bundle.go)
	rx       inbox    // the messages received, for the owner to take (inbox.go)
	events   []Event
	stats    stats

	wake wakeClock // the remotes by their earliest timer (wake.go)

	readers readerKeys // the table the readers check with, and its marks (keys.go)
	// rekeyAt: a session whose AEAD coat has less than this left to seal
	// (packet.AEADCoat.Remaining) is allowed again (rekey).
	rekeyAt uint64
	// sharedCaps are the peers' advertisements, by canonical form, that
	// their remotes share (shareCaps).
	sharedCaps map[string]*caps
	// replayHold is how long a replay window keeps a hole (replay.go): the
	// longest a remote may retry the first packet of a transaction.
	replayHold uint16
}

// defaultRekeyAt allows a session again once its AEAD coat may seal less
// than 2^33 more: after 2^33 blocks (128 GiB) in one direction with
// AES-256-GCM, far before Seal refuses (packet.ErrRekey); ChaCha20-Poly1305
// is limited only by its 2^63 counters.
const defaultRekeyAt = packet.AES256GCMBlockLimit / 2
