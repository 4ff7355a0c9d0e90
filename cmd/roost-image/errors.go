package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/roostfleet/roost/imagebuilder"
)

// Exit codes roost-image returns, as roostctl's.
const (
	// exitOK means the command did what it was asked.
	exitOK = 0
	// exitFailed means the command failed (an unreadable input file, a
	// hub that refused or could not be reached, a failed write).
	exitFailed = 1
	// exitUsage means bad usage: unknown commands or flags, wrong
	// arguments, missing or invalid flag values, flags that contradict
	// each other, release keys that do not verify the release.
	exitUsage = 2
)

// usageError is bad usage: exit code exitUsage. help marks the errors
// cobra finds before a command runs (unknown commands or flags, wrong
// arguments, missing flags), after which a pointer to --help helps.
type usageError struct {
	err  error
	help bool
}

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error {
	return usageError{err: fmt.Errorf(format, a...)}
}

// isUsage says whether err is bad usage.
func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u) || errors.Is(err, imagebuilder.ErrReleaseKeys)
}

// usageArgs makes the errors of a positional-argument check usage errors.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err: err, help: true}
		}
		return nil
	}
}

// unknownCommand is the root command's run: help without arguments, a
// usage error naming the commands (and the nearest one) otherwise.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return usageError{err: fmt.Errorf("%s; its commands: %s", msg, strings.Join(names, ", ")), help: true}
}

// execute runs roost-image with args, prints an error to stderr and returns
// the exit code.
func execute(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "roost-image: %v\n", err)
	if !isUsage(err) {
		return exitFailed
	}
	if u := (usageError{}); errors.As(err, &u) && u.help && cmd != nil {
		fmt.Fprintf(stderr, "See '%s --help' for usage.\n", cmd.CommandPath())
	}
	return exitUsage
}
