// Package buildinfo tells the commands' --version what they were built
// from: the module version and, for a build from a clone, the commit.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Version returns "PROG VERSION (go1.x[, commit C[, modified]])" from the
// binary's build information: VERSION is the module version ("(devel)"
// for a build from a clone), and the commit is the VCS revision the
// build recorded, if any.
func Version(prog string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return prog + " (unknown version)"
	}
	return format(prog, bi)
}

func format(prog string, bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	extra := []string{bi.GoVersion}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		extra = append(extra, "commit "+rev[:min(len(rev), 12)])
		if modified == "true" {
			extra = append(extra, "modified")
		}
	}
	return prog + " " + v + " (" + strings.Join(extra, ", ") + ")"
}
