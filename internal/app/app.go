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
// SIGINT and SIGTERM end the command (watchSignals).
func Main() int {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go watchSignals(sigs, cancel, os.Stderr, os.Exit)
	return Run(ctx, cli.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, os.Args[1:])
}

// watchSignals ends the command on the first signal of sigs by cancelling its context
// with cli.Interrupted as the cause: the command stops at its next check, writes nothing
// it had not yet written, and exits with 128 + the signal's number. A second signal
// exits at once with that code, for a command blocked where no context reaches (a read
// of a file on a dead hard NFS mount, a read of /proc that waits on such a process).
func watchSignals(sigs <-chan os.Signal, cancel context.CancelCauseFunc, errOut io.Writer, exit func(int)) {
	first, ok := <-sigs
	if !ok {
		return
	}
	cancel(&cli.Interrupted{Signal: number(first)})
	second, ok := <-sigs
	if !ok {
		return
	}
	fmt.Fprintf(errOut, "nfstune: %v again: exiting now\n", second)
	exit(128 + int(number(second)))
}

// number is the signal's number, SIGINT for a signal that has none.
func number(s os.Signal) syscall.Signal {
	if n, ok := s.(syscall.Signal); ok {
		return n
	}
	return syscall.SIGINT
}

// Run executes one command line and returns its exit code:
// 0 success, 1 the command's own "not clean" result (findings at --fail-on, a partial apply),
// 2 usage errors and errors reading the host, 3 a guard's refusal (nfstune shutdown), 4 a
// kernel without what the action needs, 128 + the signal's number when a signal ended the
// command before its result (130 for SIGINT, 143 for SIGTERM).
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
	// A mistyped verb: cobra's suggestions, one a line, each escaped as the verb is.
	var unknown *cli.UnknownCommandError
	if errors.As(err, &unknown) {
		if len(unknown.Suggestions) > 0 {
			fmt.Fprintf(w, "\nDid you mean this?\n")
			for _, s := range unknown.Suggestions {
				fmt.Fprintf(w, "\t%s\n", display.Text(s))
			}
		}
		fmt.Fprintf(w, "\nRun '%s --help' for usage.\n", display.Text(unknown.Path))
	}
}
