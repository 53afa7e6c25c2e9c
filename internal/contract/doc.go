// Package contract generates Engram's event contract, for platforms in any
// language, from the Go types of pkg/events: an AsyncAPI 3 document
// (api/asyncapi.yaml), the test vectors every client runs
// (api/vectors.json) and the TypeScript client's types
// (clients/typescript/src/contract.ts). `engram contract` (or `go generate
// ./internal/contract`) writes them; the tests fail when a committed file
// differs from what the Go types give.
//
// # Why generated, and from what
//
// A contract written by hand drifts from the decoder that enforces it: a
// field added to a payload, a limit changed, and the document still says
// the old thing while the workers dead-letter the events a platform built
// from it. So the schemas are made by reflection over the Go structs
// (field names, JSON types, order), and what reflection cannot see (a
// field's meaning, whether the decoder requires it, its limits and
// enumerations) is in specs.go, one entry per field. A field without an
// entry stops the generator (CheckSpecs), so a new field is described
// before it can ship.
//
// # Why the vectors are checked against the decoder
//
// The specs could still disagree with events.Decode (a field the spec says
// is optional that the decoder requires). BuildVectors therefore mutates a
// valid example of every event type along every rule of its schema (each
// field removed, emptied, mistyped, too long, with a control character,
// negative, outside the clock window, an unknown enumeration value ...) and
// runs each body through events.Decode: a mutation the schema forbids must
// be refused at that field, one it allows must decode. A disagreement is a
// generation error. The refusals keep the decoder's field and reason, so a
// client in another language checks that it refuses the same bodies for
// the same reasons (where the reason is in the words of Go's JSON library,
// only the part before them). Hand-written vectors add what a schema cannot
// say: keys twice in an object, keys spelled otherwise than their field,
// invalid UTF-8 and lone surrogate escapes, and the subject tokens of
// tricky ids. Each refusal says whether the document's JSON Schema refuses
// it too: standard JSON Schema cannot count bytes, see duplicate keys or
// know the reader's clock, so some bodies only the decoder refuses.
package contract
