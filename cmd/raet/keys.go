package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/keys"
	"github.com/raet-go/raet/road"
)

var keygenHelp = help{
	usage: `raet keygen --keep DIR --name NAME [--role ROLE] [--force]`,
	about: `Make an estate's keys (Ed25519 signing, Curve25519 box) in the keep DIR,
created if missing, and print {"name":..,"role":..,"verhex":..,"pubhex":..}.
A keep that has keys already is left alone unless --force. raet serve and
raet send make keys themselves when the keep has none; keygen is for
choosing the name first and for seeing the public keys.`,
	example: `raet keygen --keep /tmp/a --name alpha`,
}

// runKeygen makes the local estate's keys in a keep.
func runKeygen(args []string, stdout, stderr io.Writer) int {
	const prog = "raet keygen"
	fset := newFlags(prog, stderr)
	dir := fset.String("keep", "", "keep `dir`ectory")
	name := fset.String("name", "", "estate `name`")
	role := fset.String("role", "", "`role` (default: the name)")
	force := fset.Bool("force", false, "replace existing keys")
	if code, ok := parseFlags(fset, keygenHelp, args, 0, stdout, stderr); !ok {
		return code
	}
	if *dir == "" || *name == "" {
		return usageError(stderr, prog, "need --keep and --name")
	}
	if *role == "" {
		*role = *name
	}
	k, err := keep.Open(*dir, nil)
	if err != nil {
		fmt.Fprintln(stderr, "raet keygen:", err)
		return exitSetup
	}
	if _, err := k.LoadLocalRole(); err == nil && !*force {
		fmt.Fprintln(stderr, "raet keygen: the keep has keys already (use --force to replace them)")
		return exitFailure
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintln(stderr, "raet keygen:", err)
		return exitFailure
	}
	sig := keys.GenerateSigning()
	box, err := keys.GenerateBox()
	if err != nil {
		fmt.Fprintln(stderr, "raet keygen:", err)
		return exitFailure
	}
	if err := k.SaveLocalRole(keep.LocalRole{Role: *role, Seed: sig.Seed, Private: box.Private}); err != nil {
		fmt.Fprintln(stderr, "raet keygen:", err)
		return exitFailure
	}
	est := keep.LocalEstate{Name: *name, UID: 1, PUID: 1, Role: *role,
		HA: keep.HostPort{Host: "127.0.0.1", Port: road.DefaultPort}, AHA: keep.HostPort{Host: "", Port: road.DefaultPort}}
	if err := k.SaveLocal(est); err != nil {
		fmt.Fprintln(stderr, "raet keygen:", err)
		return exitFailure
	}
	json.NewEncoder(stdout).Encode(map[string]string{"name": *name, "role": *role, "verhex": sig.Verify.Hex(), "pubhex": box.Public.Hex()})
	return exitOK
}

var keysHelp = help{
	usage: `raet keys list --keep DIR
raet keys accept|reject|pend --keep DIR NAME
raet keys forget --keep DIR NAME`,
	about: `The operator's side of key acceptance. When a remote joins an estate whose
--auto is never (or once, with changed keys), its keys wait as pending and
its join waits. list prints one line per remote role {"role":..,
"acceptance":"pending|accepted|rejected","verhex":..,"pubhex":..};
accept lets the waiting join complete (a running raet serve sees it within a
second), reject refuses it, pend puts it back. NAME is a role or a remote
estate's name. forget deletes what the keep knows of the remote estate NAME
(its uids and address, not its role's acceptance), so that it can join
afresh, for example from another address on an immutable road. These
commands work beside a running raet serve on the same keep; they refuse a
keep directory that does not exist.`,
	example: `raet keys list --keep /tmp/a
raet keys accept --keep /tmp/a beta`,
}

// runKeys is the operator side of key acceptance.
func runKeys(args []string, stdout, stderr io.Writer) int {
	const prog = "raet keys"
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" {
		fset := newFlags(prog, stderr)
		fset.String("keep", "", "keep `dir`ectory (it must exist)")
		if len(args) == 0 {
			return usageError(stderr, prog, "name an operation: list, accept, reject, pend or forget")
		}
		printHelp(fset, keysHelp, stdout)
		return exitOK
	}
	op := args[0]
	nargs := 1
	switch op {
	case "list":
		nargs = 0
	case "accept", "reject", "pend", "forget":
	default:
		return usageError(stderr, prog, "unknown operation %q", op)
	}
	fset := newFlags(prog+" "+op, stderr)
	dir := fset.String("keep", "", "keep `dir`ectory (it must exist)")
	if code, ok := parseFlags(fset, keysHelp, args[1:], nargs, stdout, stderr); !ok {
		return code
	}
	if *dir == "" {
		return usageError(stderr, fset.Name(), "need --keep")
	}
	if fset.NArg() != nargs {
		return usageError(stderr, fset.Name(), "name the role (or the remote estate)")
	}
	var k *keep.Keep
	var err error
	if op == "list" {
		k, err = keep.OpenReadOnly(*dir)
	} else {
		k, err = keep.Open(*dir, &keep.Config{MustExist: true})
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fset.Name(), err)
		return exitSetup
	}
	switch op {
	case "list":
		roles, err := k.LoadRemoteRoles()
		enc := json.NewEncoder(stdout)
		for _, r := range roles {
			enc.Encode(map[string]string{"role": r.Role, "acceptance": r.Acceptance.String(), "verhex": r.Verify.Hex(), "pubhex": r.Public.Hex()})
		}
		if err != nil {
			fmt.Fprintln(stderr, "raet keys:", err)
			return exitFailure
		}
		return exitOK
	case "forget":
		name := fset.Arg(0)
		if _, err := k.LoadRemote(name); err != nil {
			fmt.Fprintf(stderr, "raet keys forget: %v\n", err)
			return exitFailure
		}
		if err := k.DeleteRemote(name); err != nil {
			fmt.Fprintf(stderr, "raet keys forget: %v\n", err)
			return exitFailure
		}
		json.NewEncoder(stdout).Encode(map[string]string{"remote": name, "forgotten": "true"})
		return exitOK
	}
	// accept, reject, pend
	role := fset.Arg(0)
	if est, err := k.LoadRemote(role); err == nil {
		role = est.Role // a remote's name: its role
	}
	status := map[string]keep.Acceptance{"accept": keep.Accepted, "reject": keep.Rejected, "pend": keep.Pending}[op]
	if err := k.SetAcceptance(role, status); err != nil {
		fmt.Fprintf(stderr, "raet keys %s: %v\n", op, err)
		return exitFailure
	}
	json.NewEncoder(stdout).Encode(map[string]string{"role": role, "acceptance": status.String()})
	return exitOK
}
