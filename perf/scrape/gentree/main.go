// Command gentree writes a synthetic host root with n NFS mounts (inventory.GenerateTree),
// for running the agent against a fixture root: gentree DIR N.
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/nfstune/nfstune/internal/inventory/inventorytest"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gentree DIR N")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[2])
	if err == nil {
		err = inventorytest.GenerateTree(os.Args[1], n)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gentree:", err)
		os.Exit(1)
	}
}
