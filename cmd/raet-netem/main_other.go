//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "raet-netem: Linux only (network namespaces and TUN)")
	os.Exit(4)
}
