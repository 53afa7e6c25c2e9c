// Package dlq writes, reads and replays Engram's dead letters (stream
// ENGRAM_DLQ, subjects <prefix>.dlq.<consumer>), and captures the messages a
// consumer exhausted through the server's max-deliveries advisory.
//
// A dead letter's body is the original message body; its headers are the
// original ones (without Nats-*) plus the events.HeaderDLQ* headers: reason,
// consumer, original subject, stream, stream sequence, deliveries, original
// Nats-Msg-Id and time. Its own Nats-Msg-Id is MsgID(stream, consumer,
// sequence), so the same message dead-lettered twice within the duplicate
// window is stored once.
//
// A letter that would not fit the server's maximum payload (an event close
// to it plus the letter's headers) keeps the first bytes of its body and
// the header events.HeaderDLQTruncated with the original size; the stream
// and sequence headers say where the whole event was. Replay refuses a
// truncated letter. Writer.Put returns the publish error when the DLQ
// refuses the letter (full: "maximum bytes exceeded"); the runner then
// keeps the event in its stream and retries, it never drops it.
//
// Writer is used by the runner; Watcher by the runner for the advisory;
// Store by `engram dlq list|show|replay`.
package dlq
