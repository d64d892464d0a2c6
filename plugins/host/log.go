package host

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// slogLogger is an hclog.Logger writing into a slog.Logger: go-plugin logs
// through it, and so do the plugins, whose JSON lines on stderr go-plugin
// parses and replays here with their level and fields.
type slogLogger struct {
	l     *slog.Logger
	name  string
	level hclog.Level
	args  []any
}

func newSlogLogger(l *slog.Logger) hclog.Logger {
	return &slogLogger{l: l, level: hclog.Trace}
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug, hclog.NoLevel, hclog.DefaultLevel:
		return slog.LevelDebug
	case hclog.Info:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (s *slogLogger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off || level < s.level {
		return
	}
	lv := slogLevel(level)
	if !s.l.Enabled(context.Background(), lv) {
		return
	}
	all := make([]any, 0, len(s.args)+len(args)+2)
	if s.name != "" {
		all = append(all, "logger", s.name)
	}
	all = append(append(all, s.args...), args...)
	if len(all)%2 == 1 { // hclog tolerates a dangling key; slog would print !BADKEY
		all = append(all, "")
	}
	s.l.Log(context.Background(), lv, msg, all...)
}

func (s *slogLogger) Trace(msg string, args ...any) { s.Log(hclog.Trace, msg, args...) }
func (s *slogLogger) Debug(msg string, args ...any) { s.Log(hclog.Debug, msg, args...) }
func (s *slogLogger) Info(msg string, args ...any)  { s.Log(hclog.Info, msg, args...) }
func (s *slogLogger) Warn(msg string, args ...any)  { s.Log(hclog.Warn, msg, args...) }
func (s *slogLogger) Error(msg string, args ...any) { s.Log(hclog.Error, msg, args...) }

func (s *slogLogger) enabled(l hclog.Level) bool {
	return l >= s.level && s.l.Enabled(context.Background(), slogLevel(l))
}
func (s *slogLogger) IsTrace() bool { return s.enabled(hclog.Trace) }
func (s *slogLogger) IsDebug() bool { return s.enabled(hclog.Debug) }
func (s *slogLogger) IsInfo() bool  { return s.enabled(hclog.Info) }
func (s *slogLogger) IsWarn() bool  { return s.enabled(hclog.Warn) }
func (s *slogLogger) IsError() bool { return s.enabled(hclog.Error) }

func (s *slogLogger) ImpliedArgs() []any { return s.args }

func (s *slogLogger) With(args ...any) hclog.Logger {
	c := *s
	c.args = append(append([]any(nil), s.args...), args...)
	return &c
}

func (s *slogLogger) Name() string { return s.name }

func (s *slogLogger) Named(name string) hclog.Logger {
	c := *s
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (s *slogLogger) ResetNamed(name string) hclog.Logger {
	c := *s
	c.name = name
	return &c
}

func (s *slogLogger) SetLevel(l hclog.Level) { s.level = l }
func (s *slogLogger) GetLevel() hclog.Level  { return s.level }

func (s *slogLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(s.StandardWriter(opts), "", 0)
}

func (s *slogLogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		s.Info(string(p))
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
