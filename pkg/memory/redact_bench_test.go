package memory

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/memory/redacttest"
)

// benchOrdinary is what most writes look like: prose and a little code, no
// secret. Redact runs on every write, so this is the path that must be cheap.
var benchOrdinary = strings.Repeat("The user prefers tabs over spaces and runs `go test ./pkg/memory/` before each commit; "+
	"the build uses Go 1.26 on Debian with Redis 8 at port 6390 (see commit 0abc8be, id 3f2b1c9e-8d4a-4c1b-9e7f-2a6d5b8c0e1f).\n", 8)

// benchShort is a short memory's label, the size an extractor writes (and
// an import of them redacts by the hundred thousand).
var benchShort = "The checkout code validates the webhook payload with exponential backoff"

// benchSecret is the same text with two secrets in it.
var benchSecret = benchOrdinary + "export GITHUB_TOKEN=ghp_R8x2Kq9LmZ4vT7nWc3Yb6Hd1Jf5Gs0PaEuQo and DB_PASS=Zk4!qP9wLm2x\n"

// benchImage is a tool result carrying a 150 KB base64 image on one line.
var benchImage = `{"type":"image","media_type":"image/png","data":"` + redacttest.Rand(redacttest.B64, 150000)(rand.New(rand.NewPCG(1, 2))) + `"}`

func BenchmarkRedact(b *testing.B) {
	for _, c := range []struct{ name, in string }{{"short", benchShort}, {"ordinary", benchOrdinary}, {"secret", benchSecret}, {"image150k", benchImage}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.in)))
			b.ReportAllocs()
			for b.Loop() {
				_ = Redact(c.in)
			}
		})
	}
}
