package app_test

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
)

// The process logger masks URL passwords in every line: the injector's
// ready line (nats://admin:<password>@...), a NATS reconnect line, a
// library error that repeats a Redis URL, the embedded server's messages.
func TestLoggerMasksURLPasswords(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	log, err := app.NewLogger(config.Log{Format: config.LogJSON, Level: "info"})
	os.Stderr = stderr
	if err != nil {
		t.Fatal(err)
	}
	const pw = "Adm1n-Secret-Pw"
	log.Info("injector ready", zap.String("nats", "nats://admin:"+pw+"@nats-1:4222,nats://admin:"+pw+"@nats-2:4222"))
	log.Info("NATS reconnected", zap.String("url", "tls://admin:"+pw+"@nats-2:4222"))
	log.Error("store", zap.Error(errors.New(`app: redis URL: parse "redis://:`+pw+`@cache:x": invalid port`)))
	log.Sugar().Warnf("nats-server: route to nats://u:%s@peer:6222 failed", pw)
	_ = log.Sync()
	w.Close()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(out), "\n") != 4 {
		t.Fatalf("want 4 lines:\n%s", out)
	}
	if strings.Contains(string(out), pw) {
		t.Errorf("a password reached the log:\n%s", out)
	}
	if !strings.Contains(string(out), "nats://admin:xxxxx@nats-1:4222,nats://admin:xxxxx@nats-2:4222") {
		t.Errorf("the ready line lost its hosts:\n%s", out)
	}
}
