//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/srt-mcp/srt-mcp/runner"
)

// watchWinch keeps the sandbox's PTY the size of our terminal.
func watchWinch(run *runner.Run) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	go func() {
		for range ch {
			if w, h, err := term.GetSize(int(os.Stdin.Fd())); err == nil {
				_ = run.Resize(uint16(h), uint16(w))
			}
		}
	}()
}
