package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/keys"
)

// runKeygen makes the local estate's keys in a keep.
func runKeygen(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("raet keygen", flag.ContinueOnError)
	fset.SetOutput(stderr)
	dir := fset.String("keep", "", "keep directory")
	name := fset.String("name", "", "estate name")
	role := fset.String("role", "", "role (default: the name)")
	force := fset.Bool("force", false, "replace existing keys")
	if err := fset.Parse(args); err != nil {
		return exitUsage
	}
	if *dir == "" || *name == "" {
		fmt.Fprintln(stderr, "raet keygen: need --keep and --name")
		return exitUsage
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
		HA: keep.HostPort{Host: "127.0.0.1", Port: 7530}, AHA: keep.HostPort{Host: "", Port: 7530}}
	if err := k.SaveLocal(est); err != nil {
		fmt.Fprintln(stderr, "raet keygen:", err)
		return exitFailure
	}
	json.NewEncoder(stdout).Encode(map[string]string{"name": *name, "role": *role, "verhex": sig.Verify.Hex(), "pubhex": box.Public.Hex()})
	return exitOK
}

// runKeys is the operator side of key acceptance.
func runKeys(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "raet keys: list|accept|reject|pend --keep DIR [NAME]")
		return exitUsage
	}
	op := args[0]
	fset := flag.NewFlagSet("raet keys "+op, flag.ContinueOnError)
	fset.SetOutput(stderr)
	dir := fset.String("keep", "", "keep directory")
	if err := fset.Parse(args[1:]); err != nil {
		return exitUsage
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "raet keys: need --keep")
		return exitUsage
	}
	k, err := keep.Open(*dir, nil)
	if err != nil {
		fmt.Fprintln(stderr, "raet keys:", err)
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
	case "accept", "reject", "pend":
		if fset.NArg() != 1 {
			fmt.Fprintf(stderr, "raet keys %s: name the role (or the remote estate)\n", op)
			return exitUsage
		}
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
	fmt.Fprintf(stderr, "raet keys: unknown operation %q\n", op)
	return exitUsage
}
