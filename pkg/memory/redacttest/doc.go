// Package redacttest is the secret corpus of memory.Redact's tests, shared
// with the tests of every path that stores text (import in internal/memio,
// transcripts in internal/extract): kinds of real secrets (issue 23's 30
// misses among them), each with a generator of fake secrets in the real
// shape (random characters from a seeded source, never a real secret, so
// the repository holds no secret-looking literal) and the contexts they are
// seen in, and Survives, which judges whether any part of a secret is left.
package redacttest
