package bus

import (
	"errors"
	"fmt"
	"strings"
)

// Subjects are dot-separated tokens ("orders.eu.new"). A filter is a subject
// whose tokens may also be "*", which matches any one token, and, as its last
// token, ">", which matches one or more tokens: the rules of NATS subjects.
// Tokens are not empty and hold no space, tab, newline or NUL; the
// wildcards are only whole tokens and never appear in a published subject.

// ErrSubject: a subject or filter is not well formed.
var ErrSubject = errors.New("raet bus: bad subject")

// checkSubject checks a published subject (no wildcards).
func checkSubject(s string, max int) error { return checkTokens(s, max, false) }

// checkFilter checks a subscription filter.
func checkFilter(s string, max int) error { return checkTokens(s, max, true) }

func checkTokens(s string, max int, filter bool) error {
	if s == "" || len(s) > max {
		return fmt.Errorf("%w: %q: empty or longer than %d bytes", ErrSubject, s, max)
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			switch s[i] {
			case ' ', '\t', '\n', '\r', 0:
				return fmt.Errorf("%w: %q: white space or NUL", ErrSubject, s)
			}
			continue
		}
		tok := s[start:i]
		switch {
		case tok == "":
			return fmt.Errorf("%w: %q: empty token", ErrSubject, s)
		case tok == "*" || tok == ">":
			if !filter {
				return fmt.Errorf("%w: %q: wildcard in a subject", ErrSubject, s)
			}
			if tok == ">" && i != len(s) {
				return fmt.Errorf("%w: %q: > is not the last token", ErrSubject, s)
			}
		case strings.ContainsAny(tok, "*>"):
			return fmt.Errorf("%w: %q: wildcard inside a token", ErrSubject, s)
		}
		start = i + 1
	}
	return nil
}

// Match reports whether subject matches filter (both well formed). It walks
// the two strings token by token without allocating.
func Match(filter, subject string) bool {
	for {
		ft, frest, fmore := strings.Cut(filter, ".")
		if ft == ">" {
			return subject != ""
		}
		if subject == "" {
			return false
		}
		st, srest, smore := strings.Cut(subject, ".")
		if ft != "*" && ft != st {
			return false
		}
		if !fmore || !smore {
			return fmore == smore
		}
		filter, subject = frest, srest
	}
}

// matchAny reports whether subject matches one of filters.
func matchAny(filters []string, subject string) bool {
	for _, f := range filters {
		if Match(f, subject) {
			return true
		}
	}
	return false
}
