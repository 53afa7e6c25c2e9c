package app

import (
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/credurl"
)

// NewLogger builds the process logger: zap's production JSON, or a
// console encoder when the format is console, or auto and stderr is a
// terminal. URL credentials are masked in every line (credurl.Core).
func NewLogger(c config.Log) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(c.Level)); err != nil {
		return nil, fmt.Errorf("app: log level %q: %w", c.Level, err)
	}
	console := c.Format == config.LogConsole || (c.Format == config.LogAuto && isTerminal(os.Stderr))
	var zc zap.Config
	if console {
		zc = zap.NewDevelopmentConfig()
		zc.Development = false
		zc.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
		zc.EncoderConfig.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		zc.DisableStacktrace = true
	} else {
		zc = zap.NewProductionConfig()
		zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	}
	zc.Level = zap.NewAtomicLevelAt(lvl)
	// Every line passes through credurl: a URL's password never reaches
	// the log, whoever logs it (a library's error, the embedded server).
	l, err := zc.Build(zap.WrapCore(credurl.Core))
	if err != nil {
		return nil, fmt.Errorf("app: logger: %w", err)
	}
	return l, nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// natsLogger adapts zap to the embedded server's logger. Notices are debug
// so that `engram serve` logs one line when ready, not the server's banner.
// Its lines carry no stack trace (the adapter's own frames say nothing),
// and a client's failed login ("authentication error": a wrong password,
// a port scan) is one warning line, not an error of the server (permission
// violations stay errors: they are a misconfigured role).
type natsLogger struct{ s *zap.SugaredLogger }

func newNATSLogger(log *zap.Logger) natsLogger {
	return natsLogger{log.Named("nats-server").WithOptions(zap.AddStacktrace(zapcore.InvalidLevel)).Sugar()}
}

func (l natsLogger) Noticef(f string, v ...any) { l.s.Debugf(f, v...) }
func (l natsLogger) Warnf(f string, v ...any)   { l.s.Warnf(f, v...) }
func (l natsLogger) Fatalf(f string, v ...any)  { l.s.Errorf(f, v...) }
func (l natsLogger) Errorf(f string, v ...any) {
	if msg := fmt.Sprintf(f, v...); clientRefused(msg) {
		l.s.Warn(msg)
		return
	}
	l.s.Errorf(f, v...)
}
func (l natsLogger) Debugf(f string, v ...any) { l.s.Debugf(f, v...) }
func (l natsLogger) Tracef(f string, v ...any) { l.s.Debugf(f, v...) }

// clientRefused reports whether a server error line is about a client
// whose login the server refused, which is the client's problem.
func clientRefused(msg string) bool { return strings.Contains(msg, "authentication error") }
