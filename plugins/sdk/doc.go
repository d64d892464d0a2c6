// Package sdk is what a plugin author needs to write a coat, serializer or
// queue for raet-go as a separate program: the plain Go interfaces of the
// three kinds (Serializer, Coat, Queue), Serve for the plugin's main, and
// the go-plugin handshake and versioned plugin sets that the host
// (package plugins/host) uses to load it.
//
// Every method is batch-shaped: a call carries one or more messages and
// returns one Result per message, because one call across the process
// boundary costs tens of microseconds however little it carries. The
// estate therefore never calls a plugin per packet: serializers and queues
// see whole messages, coats whole bodies, and the host batches where it
// can.
//
// A plugin main is three lines:
//
//	func main() {
//		sdk.Serve(mySerializer{}) // or a Coat, or a Queue
//	}
//
// It must write nothing to stdout before Serve (the handshake line goes
// there) and should log to stderr with the hclog logger of Logger: the
// host forwards those lines into its own slog logger. See plugins/README.md
// for the whole walk-through, and package sdktest for the contract tests
// every implementation should pass.
package sdk
