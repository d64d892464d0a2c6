// Command raet-queue-bolt is the durable queue plugin: messages an estate
// sends are kept in a bbolt database until their remote says done.
//
//	raet-queue-bolt --db PATH   (given as args in the plugins config)
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/raet-go/raet/plugins/queue/boltqueue"
	"github.com/raet-go/raet/plugins/sdk"
)

func main() {
	db := flag.String("db", "raet-queue.db", "the database file (relative to the plugin directory)")
	maxMsgs := flag.Int("max", 0, "most messages held (0: 1,000,000)")
	flag.Parse()
	q, err := boltqueue.Open(*db, boltqueue.Options{MaxMessages: *maxMsgs})
	if err != nil {
		fmt.Fprintln(os.Stderr, "raet-queue-bolt:", err)
		os.Exit(1)
	}
	defer q.Close()
	sdk.Serve(q, sdk.WithLogger(sdk.Logger("bolt")))
}
