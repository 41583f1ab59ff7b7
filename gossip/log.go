package gossip

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
	"strings"
)

// slogWriter turns memberlist's log lines ("[WARN] memberlist: text") into slog
// records at the matching level.
type slogWriter struct {
	logger *slog.Logger
}

// newMemberlistLogger returns the *log.Logger memberlist writes to.
func newMemberlistLogger(l *slog.Logger) *log.Logger {
	if l == nil {
		return log.New(io.Discard, "", 0)
	}
	return log.New(&slogWriter{logger: l}, "", 0)
}

func (w *slogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		level, msg := parseMemberlistLine(string(line))
		w.logger.Log(context.Background(), level, msg, "component", "memberlist")
	}
	return len(p), nil
}

// parseMemberlistLine maps memberlist's level prefix to a slog level and strips it
// (and the "memberlist: " tag) from the message.
func parseMemberlistLine(s string) (slog.Level, string) {
	level := slog.LevelInfo
	if strings.HasPrefix(s, "[") {
		if end := strings.IndexByte(s, ']'); end > 0 {
			switch s[1:end] {
			case "DEBUG", "TRACE":
				level = slog.LevelDebug
			case "INFO":
				level = slog.LevelInfo
			case "WARN":
				level = slog.LevelWarn
			case "ERR", "ERROR":
				level = slog.LevelError
			}
			s = strings.TrimSpace(s[end+1:])
		}
	}
	s = strings.TrimPrefix(s, "memberlist: ")
	// memberlist repeats this for every alive message of a member the Alive
	// delegate rejects (malformed metadata); this package logs it once per change.
	if strings.HasPrefix(s, "ignoring alive message for") {
		level = slog.LevelDebug
	}
	// Sends racing our own shutdown fail this way; nothing is wrong.
	if strings.Contains(s, "use of closed network connection") {
		level = slog.LevelDebug
	}
	return level, s
}
