// Package bus is a messaging layer over RAET stacks: publish/subscribe with
// subject filters and replay, request/reply with deadlines and queue groups,
// and push/pull work queues, the same code over a road estate (Road), a lane
// yard (Lane) or any other Transport.
//
// A pattern message is an ordinary RAET message whose body is an envelope
// (codec/envelope, defined in spec/raet.yaml and described in docs/wire.md).
package bus
