// Package erase erases a tenant, a project or a session for good, with a
// receipt, and proves it: `engram memory erase`, the admin request on the
// bus (<prefix>.admin.erase, answered by `engram serve`) and the console
// all call the same Eraser.
//
//	e := erase.New(store, erase.WithBus(erase.NewBus(js, topology)))
//	receipt, err := e.Erase(ctx, erase.Scope{Tenant: "acme", Project: "user-42"}, erase.Options{Verify: true})
//	receipt.WriteText(os.Stdout) // or json.Marshal(receipt)
//
// # What is erased
//
// A memory is about people, and a person asks for all of it to go: the
// store's records (memory.Erasure: memories with their vectors and index
// entries, edges, transcripts, summaries, cursors, injection and
// briefing records, leases, processed-event records, consolidation
// journals, and what other sessions keep of an erased memory), the
// copies on the bus (events in ENGRAM_IN, output events in ENGRAM_OUT,
// dead letters in ENGRAM_DLQ: selected by subject where it names the
// scope, by the dead letter's original-subject header, and by the body's
// tenant_id, project_id and session_id otherwise), the idle detector's
// activity records (ENGRAM_ACTIVITY), and, with WithShelf, the dead
// letters a process parked in the store while ENGRAM_DLQ refused them
// (by their original subject or body). Scopes follow
// memory.EraseScope: a tenant holds everything of it, its global
// memories included; a project its memories and records; a session its
// records and the memories written in it. A global memory is its
// tenant's: a platform whose end users are projects runs with
// ENGRAM_CROSS_PROJECT=false, and then no extracted memory is global.
//
// # Why rounds
//
// Events of the scope may be in flight while it is erased: one delivered
// to a worker just before writes its records just after. So the streams
// and the store are erased in rounds: the streams first (nothing of the
// scope is delivered again), then the store; a second round reads the
// streams from where the first stopped and erases the store again; a
// third only if the second found anything (MaxRounds). A platform should
// stop sending a user's events before erasing the user; the verification
// says whether anything came back.
//
// # What persistence keeps
//
// A delete is not an erasure while a file still holds the bytes. The
// store's Purge rewrites what keeps them (SQLite: VACUUM and the write-
// ahead log truncated; Redis: the append-only file rewritten, and the
// snapshot when one is written); stream messages are deleted with
// JetStream's secure delete, which overwrites the message in the store's
// block files. A key-value bucket's stream denies message deletes, so the
// activity records are purged instead: their bytes (base64 ids and
// times, no text) stay in free space until JetStream compacts the block
// (engram serve's store is encrypted at rest). Below the files, a file
// system or a disk may keep freed blocks: use an encrypted disk.
//
// # Verification
//
// Options.Verify looks for every text the erasure deleted (memory.Seen:
// labels, bodies, paths, entity names and ids of memories, messages,
// summaries, injected blocks, journal texts, the events' strings) and for
// the scope's ids, in the store's persistence read raw (RawScanner: the
// SQLite file and its log, free pages included; every key of the Redis
// namespace on every node), in every message of every stream (subject,
// headers, body) and in the files given to WithFiles (an unencrypted
// JetStream store). Texts shorter than MinText bytes are not looked for
// (they would be found by chance); long ones are looked for in pieces.
// A text found where a live record of another scope holds it too (the
// same words in another tenant's memory) is reported as kept there, not
// as left behind. The receipt never holds the texts, only where a text
// was found and what kind it was. The property test (TestErasureLeavesNothing)
// erases random scopes from random worlds on SQLite, Redis and a Redis
// Cluster with a real NATS server, reads everything raw itself, and
// checks the receipt's counts against what it wrote.
//
// # Erasing while engram serve runs
//
// engram serve holds the SQLite database (one process at a time) and the
// embedded NATS server, so the CLI cannot erase beside it: it asks serve
// on the bus (Ask; Serve answers, one erasure at a time), and erases
// itself only when nobody answers (serve not running, or a Redis
// deployment whose workers do not answer: the CLI then opens the store
// and the bus with the admin's credentials). Only the admin role may
// publish or subscribe to the subject.
package erase
