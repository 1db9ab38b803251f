// Package app is the process boundary of nfstune: it builds the command tree, runs it and
// turns the result into an exit code. It is the one place that prints the final error.
package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nfstune/nfstune/internal/cli"
)

// Main runs nfstune with the process's arguments and streams and returns the exit code.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, cli.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, os.Args[1:])
}

// Run executes one command line and returns its exit code:
// 0 success, 1 the command's own "not clean" result (findings at --fail-on, a partial apply),
// 2 usage errors and errors reading the host, 3 a guard's refusal (nfstune shutdown), 4 a
// kernel without what the action needs.
func Run(ctx context.Context, streams cli.IOStreams, args []string) int {
	root := cli.NewRoot(streams)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return cli.ExitOK
	}
	var exit *cli.ExitError
	if errors.As(err, &exit) {
		if exit.Err != nil {
			fmt.Fprintf(streams.ErrOut, "nfstune: %v\n", exit.Err)
		}
		return exit.Code
	}
	fmt.Fprintf(streams.ErrOut, "nfstune: %v\n", err)
	return cli.ExitError2
}
