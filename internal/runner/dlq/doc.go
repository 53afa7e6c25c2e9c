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
// refuses the letter (full: "maximum bytes exceeded").
//
// # Parking
//
// A refused letter must not keep its event in ENGRAM_IN: a nak'ed message
// stays ack-pending, and 256 poison events whose letters the DLQ refuses
// fill the injector's max-ack-pending (256), so nothing else is delivered to
// it (the issue measured 0 of 96 valid turns answered over 80 s). Parking
// stores such a letter on a Shelf (memory.Letters: the process's memory
// store) instead, so the runner can terminate the event at once, and moves
// the parked letters to the DLQ once it takes them again, oldest first,
// dropping each from the shelf only after the DLQ stored it. The store is
// the right place because it is what every valid event needs anyway: when it
// fails too, nothing flows, and the runner falls back to keeping the event
// (nak with backoff). A letter is therefore always stored somewhere before
// its event is terminated, and never dropped. Parking.Status feeds the
// readiness check "dead-letters" and the gauge engram_dlq_parked_letters.
//
// Writer is used by the runner; Parking by the runner (one per process,
// shared by its runners); Watcher by the runner for the advisory; Store by
// `engram dlq list|show|replay`.
package dlq
