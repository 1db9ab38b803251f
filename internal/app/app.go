// Package app is the process boundary of nfstune: it builds the command tree, runs it and
// turns the result into an exit code. It is the one place that prints the final error.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/nfstune/nfstune/internal/cli"
	"github.com/nfstune/nfstune/internal/display"
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
	code := cli.ExitError2
	var exit *cli.ExitError
	if errors.As(err, &exit) {
		code, err = exit.Code, exit.Err
	}
	if err != nil {
		printError(streams.ErrOut, err)
	}
	return code
}

// printError prints the final error. Errors quote mount points, exports, file names and
// arguments, so the text is escaped (display.Error): a control byte in them must not reach
// the terminal or forge a line; the problems of a join keep one line each.
func printError(w io.Writer, err error) {
	fmt.Fprintf(w, "nfstune: %s\n", display.Error(err))
}
