package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/raet-go/raet/dissect"
)

// openTxLog starts the transaction log of -txlog FILE (docs/txlog.md): its
// ends come through cfg.OnClose (after -T's printer, when both are asked
// for). The returned end flushes and closes the file.
func (o *options) openTxLog(cfg *dissect.Config) (*dissect.TxLog, func() error, error) {
	if o.txlog == "" {
		return nil, func() error { return nil }, nil
	}
	f, err := os.Create(o.txlog)
	if err != nil {
		return nil, nil, fmt.Errorf("-txlog: %w", err)
	}
	tl := dissect.NewTxLog(f)
	if prev := cfg.OnClose; prev != nil {
		cfg.OnClose = func(tx *dissect.Transaction) { prev(tx); tl.Closed(tx) }
	} else {
		cfg.OnClose = tl.Closed
	}
	end := func() error {
		if err := errors.Join(tl.Flush(), f.Close()); err != nil {
			return fmt.Errorf("-txlog: %w", err)
		}
		return nil
	}
	return tl, end, nil
}
