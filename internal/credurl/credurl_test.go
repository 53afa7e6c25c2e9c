package credurl_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/engram-memory/engram/internal/credurl"
)

func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"nats://admin:s3cret@127.0.0.1:4222", "nats://admin:xxxxx@127.0.0.1:4222"},
		{"nats://a:p1@h1:4222,nats://a:p2@h2:4222, tls://b:p3@h3", "nats://a:xxxxx@h1:4222,nats://a:xxxxx@h2:4222, tls://b:xxxxx@h3"},
		{"redis://:pw@cache:6379/0", "redis://:xxxxx@cache:6379/0"},
		{"rediss://engram:p@ss/w?rd#x@cache:6380/0", "rediss://engram:xxxxx@cache:6380/0"},
		{"redis://h1:7001,redis://u:pw@h2:7002", "redis://h1:7001,redis://u:xxxxx@h2:7002"},
		{"nats://tok3n@host:4222", "nats://xxxxx@host:4222"},
		{"https://ghp_abc@github.com/x", "https://xxxxx@github.com/x"},
		{"connect to NATS at nats://admin:pw@h:4222: no servers", "connect to NATS at nats://admin:xxxxx@h:4222: no servers"},
		{`parse "redis://:p\"w@h:x": invalid port`, `parse "redis://:xxxxx@h:x": invalid port`},
		{`{"url":"nats://u:pw@h"}`, `{"url":"nats://u:xxxxx@h"}`},
		{"<redis://u:pw@h>", "<redis://u:xxxxx@h>"},
		{"http://127.0.0.1:7474/readyz", "http://127.0.0.1:7474/readyz"},
		{"no url here: user@example.com", "no url here: user@example.com"},
		{"://x@y", "://x@y"},
		{"nats://admin:xxxxx@h", "nats://admin:xxxxx@h"},
		{"", ""},
	} {
		if got := credurl.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Libraries repeat the URL in their errors: the password is in the
// message, and Error takes it out while errors.Is/As still see the cause.
func TestErrorOfLibraries(t *testing.T) {
	const pw = "Sup3rSecretPw"
	_, uerr := url.Parse("redis://:" + pw + "@cache:port/0")
	_, rerr := goredis.ParseURL("redis://engram:" + pw + "@cache:6379/notadb")
	_, rerr2 := goredis.ParseURL("redis://engram:" + pw + "@cache:x")
	ferr := fmt.Errorf("app: redis URL: %w", &fs.PathError{Op: "open", Path: "nats://a:" + pw + "@h", Err: os.ErrNotExist})
	for _, err := range []error{uerr, rerr, rerr2, ferr} {
		if err == nil {
			t.Fatal("want an error from the library")
		}
		if !strings.Contains(err.Error(), pw) {
			t.Logf("the library does not repeat the password: %v", err)
		}
		r := credurl.Error(err)
		if strings.Contains(r.Error(), pw) {
			t.Errorf("password in %q", r)
		}
		if !errors.Is(r, err) {
			t.Errorf("redacted error does not unwrap to the original")
		}
	}
	var pe *fs.PathError
	if !errors.As(credurl.Error(ferr), &pe) {
		t.Error("errors.As does not see through")
	}
	if credurl.Error(nil) != nil {
		t.Error("Error(nil) != nil")
	}
	plain := errors.New("no url")
	if credurl.Error(plain) != plain {
		t.Error("an error without a URL should be returned as is")
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

func TestCore(t *testing.T) {
	obs, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(credurl.Core(obs)).With(zap.String("nats", "nats://admin:pw1@h:4222"))
	log.Info("ready on nats://admin:pw2@h:4222",
		zap.String("url", "nats://u:pw3@h"), zap.Error(errors.New(`parse "redis://:pw4@h:x": invalid port`)),
		zap.Stringer("s", stringer("redis://:pw5@h")), zap.ByteString("b", []byte("redis://:pw6@h")),
		zap.Int("n", 3), zap.String("plain", "x"))
	log.Sugar().Warnf("NATS reconnected to %s", "tls://a:pw7@h")
	log.Debug("no url", zap.String("k", "v"))
	if logs.Len() != 3 {
		t.Fatalf("%d entries, want 3", logs.Len())
	}
	for _, e := range logs.All() {
		line := fmt.Sprint(e.Message, e.ContextMap())
		for i := 1; i <= 7; i++ {
			if strings.Contains(line, fmt.Sprintf("pw%d", i)) {
				t.Errorf("pw%d in %s", i, line)
			}
		}
	}
	m := logs.All()[0].ContextMap()
	if m["url"] != "nats://u:xxxxx@h" || m["n"] != int64(3) || m["plain"] != "x" || m["nats"] != "nats://admin:xxxxx@h:4222" {
		t.Errorf("fields = %v", m)
	}
	// Level checks still apply through the wrapper.
	quiet := zap.New(credurl.Core(zapcore.NewNopCore()))
	if quiet.Core().Enabled(zapcore.ErrorLevel) {
		t.Error("a nop core became enabled")
	}
}

func FuzzRedact(f *testing.F) {
	for _, s := range []string{"nats://a:b@c", "redis://:p@h,redis://h2", `"x://\"@"`, "a://b://c@d"} {
		f.Add(s, "Pw")
	}
	f.Fuzz(func(t *testing.T, s, pw string) {
		r := credurl.Redact(s)
		if again := credurl.Redact(r); again != r {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, r, again)
		}
		// A password embedded in a URL of the text never survives.
		if pw == "" || strings.ContainsAny(pw, " \t\n\r\f\v'\"<>`") || strings.Contains(pw, "://") || strings.Contains(pw, credurl.Mask) {
			return
		}
		u := "nats://user:" + pw + "@host:4222"
		out := credurl.Redact("at " + u + " now")
		if strings.Contains(out, ":"+pw+"@") {
			t.Fatalf("password survived: %q", out)
		}
	})
}

func BenchmarkCore(b *testing.B) {
	log := zap.New(credurl.Core(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(discard{}), zapcore.InfoLevel)))
	for b.Loop() {
		log.Info("turn answered", zap.String("event_id", "01JXYZ"), zap.String("project", "acme/web"), zap.Int("lines", 4))
	}
}

func BenchmarkPlainCore(b *testing.B) {
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(discard{}), zapcore.InfoLevel))
	for b.Loop() {
		log.Info("turn answered", zap.String("event_id", "01JXYZ"), zap.String("project", "acme/web"), zap.Int("lines", 4))
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// Issue 31: every kind of field is searched, arrays, objects, reflected
// values and error lists too.
func TestCoreRedactsEveryFieldKind(t *testing.T) {
	const pw = "0llama-Pa55word"
	u := "http://engram:" + pw + "@ollama:11434"
	var buf strings.Builder
	log := zap.New(credurl.Core(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&buf), zapcore.DebugLevel)))
	log.Info("model down", zap.Strings("urls", []string{u}), zap.Any("cfg", struct{ Host string }{u}),
		zap.Errors("errs", []error{errors.New("dial " + u)}), zap.Any("panic", "get "+u))
	if strings.Contains(buf.String(), pw) || !strings.Contains(buf.String(), "engram:xxxxx@") {
		t.Errorf("log line shows the password, or no masked URL:\n%s", buf.String())
	}
}

// A credential in a URL's query (an Ollama behind a gateway that takes
// ?api_key=..., a presigned URL's signature) is as secret as a password in
// its user information: the probe of 2026-12-06 found
// ENGRAM_OLLAMA_HOST=http://host/?api_key=... printed whole on the
// unauthenticated /readyz and in every "dependency unavailable" log line.
func TestRedactQuerySecrets(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://127.0.0.1:11434/?api_key=SECRETQ123", "http://127.0.0.1:11434/?api_key=xxxxx"},
		{`version at http://h:1/?api_key=S1: Get "http://h:1/api/version?api_key=S1": dial tcp`,
			`version at http://h:1/?api_key=xxxxx: Get "http://h:1/api/version?api_key=xxxxx": dial tcp`},
		{"https://gw.example/ollama?model=x&token=T0k3n&x=1", "https://gw.example/ollama?model=x&token=xxxxx&x=1"},
		{"https://b.example/o?X-Amz-Signature=abc123&X-Amz-Credential=AKIA%2F1", "https://b.example/o?X-Amz-Signature=xxxxx&X-Amz-Credential=xxxxx"},
		{"http://h/?password=p&user=u#frag", "http://h/?password=xxxxx&user=u#frag"},
		{"redis://u:pw@h:1/0?client_secret=cs", "redis://u:xxxxx@h:1/0?client_secret=xxxxx"},
		{`{"url":"http://h/?key=v\"}"}`, `{"url":"http://h/?key=xxxxx\"}"}`},
		// what is not a credential stays
		{"http://127.0.0.1:7474/readyz?verbose=1&page=2", "http://127.0.0.1:7474/readyz?verbose=1&page=2"},
		{"no url: ?token=x", "no url: ?token=x"},
	} {
		if got := credurl.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
